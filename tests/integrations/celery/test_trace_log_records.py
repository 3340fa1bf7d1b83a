"""Celery's task log lines are written without walking the stack or going through ``reprlib`` for
plain values, and what a handler or formatter reads is what ``Logger.log`` would have given it."""

from __future__ import annotations

import logging
import math
from typing import Any, Dict, List

import pytest
from sync_worker_celery import app_trace
from sync_worker_celery.request import Context

_TIMING = {"created", "msecs", "relativeCreated"}
# every field a ``%``-style format can name (asctime and message are made by the formatter)
_FORMAT = " ".join(f"%({name})s" for name in (
    "name", "levelno", "levelname", "pathname", "filename", "module", "lineno", "funcName", "thread",
    "threadName", "process", "processName", "message", "data"))


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: List[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept() -> Any:
    keep = _Keep()
    targets = [app_trace.logger, app_trace.strategy_logger]
    levels = [t.level for t in targets]
    for target in targets:
        target.addHandler(keep)
        target.setLevel(logging.INFO)
    yield keep
    for target, level in zip(targets, levels):
        target.removeHandler(keep)
        target.setLevel(level)


def _request() -> Context:
    return Context(id="t-1", task="proj.add", args=[2, 3.5], kwargs={"y": "z"}, eta=None, hostname="w1")


def test_a_line_makes_the_record_logger_log_would(kept: _Keep) -> None:
    error = ValueError("boom")
    context: Dict[str, Any] = {"id": "t-1", "name": "proj.add", "args": "[2]", "kwargs": "{}", "runtime": 0.25,
                               "return_value": "5"}
    for level, exc_info in ((logging.INFO, None), (logging.ERROR, (ValueError, error, None))):
        app_trace._write(app_trace.logger, level, app_trace.LOG_SUCCESS, context, exc_info)
        fast = kept.records.pop()
        app_trace._log(app_trace.logger, level, app_trace.LOG_SUCCESS, context, exc_info)  # Logger.log: findCaller
        slow = kept.records.pop()
        same = {k: v for k, v in vars(fast).items() if k not in _TIMING}
        assert same == {k: v for k, v in vars(slow).items() if k not in _TIMING}
        assert same["funcName"] == "_log" and same["pathname"] == app_trace.__file__ and same["data"] is context
        formatter = logging.Formatter(_FORMAT)
        assert formatter.format(fast) == formatter.format(slow)


def test_the_task_lines_skip_the_stack_walk_and_keep_their_text_and_data(
        kept: _Keep, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging.Logger, "findCaller", lambda *a, **k: pytest.fail("stack walked"))
    request = _request()
    app_trace.log_received(request)
    app_trace.log_success(request, 5, 0.5)
    received, succeeded = kept.records
    assert received.name == "celery.worker.strategy" and succeeded.name == "celery.app.trace"
    assert received.getMessage() == "Task proj.add[t-1] received"
    assert succeeded.getMessage() == "Task proj.add[t-1] succeeded in 0.5s: 5"
    assert succeeded.data == {"id": "t-1", "name": "proj.add", "return_value": "5", "runtime": 0.5,  # type: ignore[attr-defined]
                              "args": "[2, 3.5]", "kwargs": "{'y': 'z'}"}
    assert (succeeded.funcName, succeeded.lineno) == (app_trace._CALLER[2], app_trace._CALLER[1])


def test_a_logger_class_of_its_own_still_gets_the_line_through_logger_log(kept: _Keep) -> None:
    class Audited(logging.Logger):
        def _log(self, *args: Any, **kwargs: Any) -> None:
            seen.append(args[1])
            super()._log(*args, **kwargs)

    seen: List[str] = []
    audited = Audited("celery.app.trace.audited")
    audited.addHandler(kept)
    audited.setLevel(logging.INFO)
    app_trace._write(audited, logging.INFO, app_trace.LOG_RETRY, {"id": "1", "name": "n", "exc": "e"})
    assert seen == [app_trace.LOG_RETRY]
    assert kept.records[-1].getMessage() == "Task n[1] retry: e"


class _MyInt(int):
    def __repr__(self) -> str:
        return "MyInt"


_VALUES: List[Any] = [
    0, -7, 10 ** 39, 10 ** 40, -(10 ** 39), 1.5, math.inf, math.nan, -0.0, True, None, "", "x" * 1022, "x" * 1023,
    "'" * 600, "é\n", [], [1, 2.5, "a", None, True, 3], [1, 2, 3, 4, 5, 6, 7], (), (1,), (1, 2, 3, 4, 5, 6, 7),
    [[1]], [(1,)], ([],), {}, {"a": 1}, [{}], _MyInt(3), [_MyInt(3)], ["y" * 2000], [10 ** 50], {1, 2}, b"b",
    object,
]


@pytest.mark.parametrize("value", _VALUES, ids=[f"v{i}" for i in range(len(_VALUES))])
def test_safe_repr_is_reprlibs(value: Any) -> None:
    assert app_trace.safe_repr(value) == app_trace._repr.repr(value)


def test_plain_arguments_and_results_skip_reprlib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app_trace._repr, "repr", lambda value: pytest.fail(f"reprlib asked for {value!r}"))
    assert app_trace.safe_repr([1733205123.25]) == "[1733205123.25]"
    assert app_trace.safe_repr((2, "a", None)) == "(2, 'a', None)"
    assert app_trace.safe_repr({}) == "{}"
    assert app_trace.safe_repr(1733205123.5) == "1733205123.5"
