"""A running call's ``self.request`` is a copy of the worker's request made without re-running
``Context.__init__`` (same fields, own ``headers``); a Task class with its own ``push_request``
still gets it called. Signals without receivers are sent without taking their lock."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
from sync_worker_celery import Celery, signals
from sync_worker_celery.execution import trace
from sync_worker_celery.request import Context
from sync_worker_celery.task import Task


def _request() -> Context:
    request = Context(id="t-1", task="proj.view", args=[1], kwargs={"k": 2}, retries=1, is_eager=False,
                      called_directly=False, hostname="w1", root_id="r-1", parent_id=None,
                      headers={"tenant": "acme", "retries": 9, "_hidden": 1, "custom": [1]},
                      delivery_info={"exchange": "", "routing_key": "q", "priority": None, "redelivered": True})
    request.properties = {"correlation_id": "t-1", "app_id": "x"}
    request._publish_state = print  # type: ignore[attr-defined]
    return request


def _constructed(request: Context) -> Dict[str, Any]:
    """What trace pushed before: Context built again from the request's fields and headers."""
    return vars(Context(**{k: v for k, v in vars(request).items() if k != "headers"}, headers=request.headers))


def test_copy_is_what_constructing_from_the_fields_makes() -> None:
    request = _request()
    copied = request.copy()
    assert vars(copied) == _constructed(request)
    assert copied.headers == request.headers and copied.headers is not request.headers
    assert copied.tenant == "acme" and copied.retries == 1  # type: ignore[attr-defined]


def test_trace_pushes_the_copy_without_running_context_init(monkeypatch: pytest.MonkeyPatch) -> None:
    app = Celery("copy-test")
    seen: List[Dict[str, Any]] = []

    @app.task(bind=True, name="proj.view")
    def view(self: Any, x: int, k: int = 0) -> int:
        seen.append(dict(vars(self.request)))
        return x + k

    request = _request()
    expected = _constructed(request)
    monkeypatch.setattr(Context, "__init__", lambda *a, **k: pytest.fail("Context.__init__ ran"))
    outcome = trace(view, (1,), {"k": 2}, request)
    assert outcome.retval == 3
    assert seen == [expected]


def test_a_task_class_with_its_own_push_request_still_gets_it_called() -> None:
    pushed: List[Dict[str, Any]] = []

    class Audited(Task):
        def push_request(self, *args: Any, **kwargs: Any) -> None:
            pushed.append(kwargs)
            super().push_request(*args, **kwargs)

    app = Celery("copy-test-2")

    @app.task(bind=True, base=Audited, name="proj.view2")
    def view2(self: Any) -> str:
        return str(self.request.tenant)

    request = _request()
    assert trace(view2, (), {}, request).retval == "acme"
    assert pushed and pushed[0]["id"] == "t-1" and pushed[0]["headers"] == request.headers


class _NoLock:
    def __enter__(self) -> None:
        pytest.fail("the signal's lock was taken")

    def __exit__(self, *exc: Any) -> None:
        pass


def test_a_signal_without_receivers_is_sent_without_its_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    signal = signals.Signal("probe")
    monkeypatch.setattr(signal, "_lock", _NoLock())
    assert signal.send(sender=None, x=1) == []
    got: List[Any] = []
    monkeypatch.undo()
    signal.connect(lambda **kw: got.append(kw["x"]), weak=False)
    assert [r for _, r in signal.send(sender=None, x=2)] == [None] and got == [2]
