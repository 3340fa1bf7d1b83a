"""Canvas as one durable workflow (chain, group, chord, countdown, link), Celery's signals with
their senders and arguments, and eager mode."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
from sync_worker_celery import chain, chord, group, signals, states
from sync_worker_celery.result import GroupResult


@pytest.mark.usefixtures("sample_worker")
class TestCanvasLive:
    def test_chain_passes_results_along_as_one_workflow(self, sample_app) -> None:
        from proj.tasks import add

        result = chain(add.s(1, 2), add.s(10), add.si(100, 1)).apply_async()
        assert result.get(timeout=30) == 101
        execution = sample_app.client.describe_workflow(result.id)
        assert execution.workflow_type == "sync_worker_celery.canvas"

    def test_pipe_syntax_and_group_and_chord(self) -> None:
        from proj.tasks import add, tsum

        assert (add.s(2, 2) | add.s(4)).delay().get(timeout=30) == 8
        grouped = group(add.s(i, i) for i in range(5)).apply_async()
        assert isinstance(grouped, GroupResult)
        assert grouped.get(timeout=30) == [0, 2, 4, 6, 8]
        assert grouped.ready() and grouped.successful() and grouped.completed_count() == 5
        assert chord([add.s(i, 1) for i in range(4)])(tsum.s()).get(timeout=30) == 10
        nested = chain(add.s(1, 1), group(add.s(1), chain(add.s(2), add.s(3))), tsum.s())
        assert nested.apply_async().get(timeout=60) == (2 + 1) + (2 + 2 + 3)

    def test_member_results_are_readable_by_id(self) -> None:
        from proj.tasks import add

        grouped = group(add.s(1, 1), add.s(2, 2)).apply_async()
        assert grouped.get(timeout=30) == [2, 4]
        assert [member.get(timeout=10) for member in grouped.results] == [2, 4]

    def test_a_failing_member_fails_the_canvas_with_its_own_error(self) -> None:
        from proj.tasks import add, explode

        result = chain(add.s(1, 1), explode.si("chain broke"), add.s(1)).apply_async()
        with pytest.raises(ValueError, match="chain broke"):
            result.get(timeout=30)
        assert result.state == states.FAILURE

    def test_countdown_and_link(self) -> None:
        from proj.tasks import add

        result = add.apply_async((2, 2), countdown=1, link=add.s(10))
        assert result.get(timeout=30) == 4

    def test_revoking_a_canvas(self) -> None:
        from proj.tasks import sleepy

        result = chain(sleepy.s(20), sleepy.s()).apply_async()
        result.revoke()
        assert result.state == states.REVOKED


class TestSignals:
    def test_publish_and_task_signals_with_celery_senders(self, sample_app, sample_worker) -> None:
        from proj.tasks import add, explode, flaky

        seen: List[Dict[str, Any]] = []

        def record(name: str):
            def receiver(sender: Any = None, **kwargs: Any) -> None:
                kwargs.pop("signal")
                seen.append({"signal": name, "sender": sender, **kwargs})
            return receiver

        receivers = {name: record(name) for name in ("before_task_publish", "after_task_publish", "task_prerun",
                                                     "task_postrun", "task_success", "task_failure", "task_retry")}
        for name, receiver in receivers.items():
            getattr(signals, name).connect(receiver, weak=False)
        only_add: List[Any] = []
        signals.task_success.connect(lambda sender=None, **kw: only_add.append(kw["result"]), sender=add, weak=False)
        try:
            result = add.delay(3, 4)
            assert result.get(timeout=15) == 7
            with pytest.raises(ValueError):
                explode.delay("signal me").get(timeout=15)
            flaky.delay(2).get(timeout=15)
        finally:
            for name, receiver in receivers.items():
                getattr(signals, name).disconnect(receiver)

        def first(name: str, task: Any) -> Dict[str, Any]:
            matches = [s for s in seen if s["signal"] == name and
                       (s["sender"] is task or s["sender"] == getattr(task, "name", None))]
            assert matches, f"no {name} for {task}"
            return matches[0]

        publish = first("before_task_publish", add)
        assert publish["sender"] == "proj.tasks.add" and publish["routing_key"] == "proj-default"
        assert publish["headers"]["id"] == result.id and publish["body"][0] == (3, 4)
        assert first("after_task_publish", add)["headers"]["task"] == "proj.tasks.add"
        prerun = first("task_prerun", add)
        assert prerun["task_id"] == result.id and prerun["task"] is add and prerun["args"] == (3, 4)
        postrun = first("task_postrun", add)
        assert postrun["retval"] == 7 and postrun["state"] == states.SUCCESS
        assert first("task_success", add)["result"] == 7
        failure = first("task_failure", explode)
        assert isinstance(failure["exception"], ValueError) and failure["einfo"].traceback
        retry = first("task_retry", flaky)
        assert retry["request"].retries == 0 and str(retry["reason"]) == "upstream down"
        assert 7 in only_add

    def test_worker_lifecycle_signals(self, sample_app) -> None:
        from sync_worker_celery.worker import WorkerGroup

        from ._support import pool

        seen: List[Any] = []

        def recorder(name: str) -> Any:
            return lambda sender=None, **kw: seen.append((name, sender))

        handlers = {name: recorder(name) for name in ("worker_init", "worker_process_init", "worker_ready",
                                                      "worker_shutting_down", "worker_shutdown")}
        for name, handler in handlers.items():
            getattr(signals, name).connect(handler, weak=False)
        try:
            group = WorkerGroup(sample_app, sample_app.workers_for(["proj-lifecycle"], pool=pool()))
            group.start()
            assert group.wait_ready(30)
            group.stop()
            group.join(30)
        finally:
            for name, handler in handlers.items():
                getattr(signals, name).disconnect(handler)
        assert [name for name, _ in seen] == ["worker_init", "worker_process_init", "worker_ready",
                                              "worker_shutting_down", "worker_shutdown"]
        assert dict(seen)["worker_ready"] is group and dict(seen)["worker_process_init"] is None

    def test_receiver_errors_are_logged_not_raised(self) -> None:
        signal = signals.Signal("test")

        def broken(**kwargs: Any) -> None:
            raise RuntimeError("handler bug")

        signal.connect(broken)
        responses = signal.send(sender=None)
        assert isinstance(responses[0][1], RuntimeError)


    def test_a_receiver_with_a_dead_receivers_key_is_connected(self) -> None:
        # A weak receiver that died leaves its key behind until pruned; a new receiver with the same key (the
        # same dispatch_uid here; an id() that CPython reused for a new function object in Celery's suite)
        # must be connected and called, not taken for the dead one.
        import gc

        signal = signals.Signal("test")
        calls: List[str] = []

        def first(**kwargs: Any) -> None:
            calls.append("first")

        signal.connect(first, dispatch_uid="handler")
        del first
        gc.collect()

        def second(**kwargs: Any) -> None:
            calls.append("second")

        signal.connect(second, dispatch_uid="handler")
        signal.send(sender=None)
        assert calls == ["second"]


class TestEager:
    def test_always_eager_runs_inline_with_retries_and_canvas(self, sample_app) -> None:
        from proj.tasks import add, explode, flaky, greet, tsum

        sample_app.conf.task_always_eager = True
        try:
            result = add.delay(1, 2)
            assert result.get() == 3 and result.state == states.SUCCESS
            assert greet.delay("eager", punctuation=".").get() == "hello, eager."
            assert flaky.delay(3).get()["attempt"] == 3               # retries run at once
            failed = explode.delay("eager boom")
            assert failed.state == states.FAILURE and isinstance(failed.result, ValueError)
            sample_app.conf.task_eager_propagates = True
            with pytest.raises(ValueError, match="eager boom"):
                explode.delay("eager boom")
            assert chain(add.s(1, 1), add.s(2)).delay().get() == 4
            assert group(add.s(1, 1), add.s(2, 2)).delay().get() == [2, 4]
            assert chord([add.s(1, 1), add.s(2, 2)])(tsum.s()).get() == 6
        finally:
            sample_app.conf.task_always_eager = False
            sample_app.conf.task_eager_propagates = False

    def test_calling_a_task_runs_the_function(self) -> None:
        from proj.tasks import add

        assert add(2, 5) == 7


def test_signature_fields_are_assignable() -> None:
    from proj.tasks import add

    sig = add.s(1, 2)
    sig.args = (5, 6)
    sig.kwargs = {}
    sig.immutable = True
    assert (sig.args, sig["args"], sig.immutable) == ((5, 6), (5, 6), True)
    assert sig.apply().get() == 11
