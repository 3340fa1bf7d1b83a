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
