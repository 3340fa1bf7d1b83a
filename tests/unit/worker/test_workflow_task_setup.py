"""Per-task setup a workflow task skips when its completion lands at once (the lease window)."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from sync_worker import payloads, workflow
from sync_worker.errors import TransportError
from sync_worker.protocol import parse_task
from sync_worker.runtime.backend import ThreadBackend
from sync_worker.runtime.inflight import InflightTask
from sync_worker.worker import workflow_tasks
from sync_worker.workflow.registry import WorkflowRegistry

from .fakes import FakeClient


@workflow.defn(name="setup.one_activity")
class OneActivity:
    def run(self, ctx: Any) -> Any:
        value = yield ctx.schedule_activity("setup.noop", [])
        return value


def _task() -> Dict[str, Any]:
    return {"task_id": "wft-1", "workflow_id": "wf-1", "run_id": "run-1", "workflow_type": "setup.one_activity",
            "workflow_task_attempt": 1, "payload_codec": "avro", "arguments": payloads.envelope([]),
            "lease_expires_at": "2099-01-01T00:00:00Z", "next_history_page_token": None,
            "history_events": [{"event_type": "WorkflowStarted", "sequence": 1,
                                "payload": {"timestamp": "2026-03-01T12:00:00+00:00"}}]}


def _run(client: FakeClient) -> str:
    task = parse_task("workflow", _task())
    return workflow_tasks.run_workflow_task(
        client=client, task=task, registry=WorkflowRegistry([OneActivity]), worker_id="w", task_queue="q",
        inflight=InflightTask(ThreadBackend(), "workflow", task.task_id), sleep=lambda _: None)


def test_the_lease_window_is_worked_out_only_when_a_first_report_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: List[float] = []
    real = workflow_tasks.lease_deadline

    def counted(task: Any, **kwargs: Any) -> float:
        seen.append(real(task, **kwargs))
        return seen[-1]

    monkeypatch.setattr(workflow_tasks, "lease_deadline", counted)
    client = FakeClient()
    assert _run(client) == "completed"
    assert seen == []  # landed at once: no window
    client.complete_errors.append(TransportError("connection reset"))
    assert _run(client) == "completed"
    # worked out once, from the task's lease (2099) plus the grace: the retry went through
    assert len(seen) == 1 and seen[0] > 4_000_000_000
    completes = [call for call in client.calls if call[0] == "complete_workflow"]
    assert len(completes) == 3 and completes[1][2] == completes[2][2]


def test_without_interceptors_no_interceptor_context_is_built_and_observability_is_not_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    built: List[Any] = []
    real = workflow_tasks.WorkflowTaskInterceptorContext

    def counted(**kwargs: Any) -> Any:
        built.append(kwargs)
        return real(**kwargs)

    asked: List[bool] = []

    def observability() -> bool:
        asked.append(True)
        return True

    monkeypatch.setattr(workflow_tasks, "WorkflowTaskInterceptorContext", counted)
    task = parse_task("workflow", _task())
    client = FakeClient()
    common: Dict[str, Any] = dict(client=client, registry=WorkflowRegistry([OneActivity]), worker_id="w",
                                  task_queue="q", sleep=lambda _: None, observability_supported=observability)
    outcome = workflow_tasks.run_workflow_task(task=task, inflight=InflightTask(ThreadBackend(), "workflow", "wft-1"),
                                               **common)
    assert outcome == "completed" and built == [] and asked == []

    class Seeing:
        def execute_workflow_task(self, context: Any, next: Any) -> Any:
            built.append(context.observability_supported)
            return next(context)

    outcome = workflow_tasks.run_workflow_task(task=parse_task("workflow", _task()), interceptors=[Seeing()],
                                               inflight=InflightTask(ThreadBackend(), "workflow", "wft-1"), **common)
    # with an interceptor: its context is built, observability asked once, and the same commands sent
    assert outcome == "completed" and len(built) == 2 and built[1] is True and asked == [True]
    completes = [call for call in client.calls if call[0] == "complete_workflow"]
    assert len(completes) == 2 and completes[0][2] == completes[1][2]


@pytest.mark.parametrize("change, problem", [
    ({"task_id": ""}, "missing task_id"), ({"workflow_type": None}, "missing workflow_type"),
    ({"workflow_task_attempt": 0}, "workflow_task_attempt is not an integer >= 1"),
    ({"workflow_task_attempt": True}, "workflow_task_attempt is not an integer >= 1"),
    ({"workflow_task_attempt": None}, "workflow_task_attempt is not an integer >= 1"),
])
def test_a_workflow_task_off_the_inline_parse_is_still_refused_by_name(change: Dict[str, Any], problem: str) -> None:
    from sync_worker.protocol import MalformedTask

    with pytest.raises(MalformedTask) as refused:
        parse_task("workflow", {**_task(), **change})
    assert refused.value.problems == [problem]


def test_the_inline_workflow_parse_gives_the_checked_parse() -> None:
    raw = {**_task(), "task_kind": "workflow", "workflow_update_id": "u-1", "workflow_task_attempt": 3}
    parsed = parse_task("workflow", raw)
    assert (parsed.task_id, parsed.attempt, parsed.workflow_type, parsed.workflow_id, parsed.run_id,
            parsed.workflow_update_id, parsed.lease_expires_at, parsed.raw) == (
        "wft-1", 3, "setup.one_activity", "wf-1", "run-1", "u-1", "2099-01-01T00:00:00Z", raw)
    absent = parse_task("workflow", {key: value for key, value in _task().items() if key != "workflow_task_attempt"})
    assert absent.attempt == 1 and absent.workflow_update_id is None


def test_the_sticky_size_is_the_compact_json_text_length() -> None:
    import datetime
    import json

    from sync_worker.worker.sticky import _encoded_size

    events = [*_task()["history_events"], {"event_type": "SignalReceived", "sequence": 2, "payload": {
        "text": "é\u2028\"x\"", "at": datetime.datetime(2026, 1, 1), "n": 1.5}}]
    assert _encoded_size(events) == len(json.dumps(events, separators=(",", ":"), default=str))
    looped: Dict[str, Any] = {}
    looped["self"] = looped
    assert _encoded_size([looped, looped]) == 1024  # (not JSON: the fallback estimate)
