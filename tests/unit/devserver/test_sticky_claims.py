"""A completion's sticky claim (protocol §4.7) is noted before its commands are applied (issue 29).

The claim is bounded by the run's events once the completion is recorded, as before (a claim of the
very event the completion recorded is kept, one beyond it forgotten); a completion that closes the
run writes the run's row once, the claim included.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from sync_worker.devserver import DevServer
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import Raw

_SCHEDULE = [{"type": "schedule_activity", "activity_type": "noop", "arguments": envelope([]),
              "start_to_close_timeout": 30}]


def _complete(raw: Raw, task: Dict[str, Any], commands: List[Dict[str, Any]], sequence: Optional[int]) -> Any:
    body: Dict[str, Any] = {"lease_owner": "w1", "workflow_task_attempt": task["workflow_task_attempt"],
                            "commands": commands}
    if sequence is not None:
        body["sticky_cache"] = {"worker_id": "w1", "run_id": task["run_id"], "ttl_seconds": 60,
                                "last_history_sequence": sequence}
    return raw.ok("POST", f"/worker/workflow-tasks/{task['task_id']}/complete", body, plane="worker")


def _second_task(raw: Raw, sequence: Optional[int]) -> Dict[str, Any]:
    """A one-activity run's second workflow task, after a first completion claiming ``sequence``."""
    raw.start("wf-1")
    first = raw.poll()
    _complete(raw, first, _SCHEDULE, sequence)
    act = raw.poll(kind="activity")
    raw.ok("POST", f"/worker/activity-tasks/{act['task_id']}/complete",
           {"activity_attempt_id": act["activity_attempt_id"], "lease_owner": "w1", "result": envelope(None)},
           plane="worker")
    task: Dict[str, Any] = raw.poll()
    return task


@pytest.mark.parametrize(("sequence", "kept"), [(2, True), (3, True), (4, False), (0, False), (None, False)])
def test_a_claim_is_bounded_by_the_events_the_completion_recorded(sequence: Optional[int], kept: bool) -> None:
    with DevServer(port=0) as server:
        raw = Raw(server.url)
        task = _second_task(raw, sequence)  # the first completion recorded event 3 (ActivityScheduled)
        if kept:
            assert task["sticky_replay_mode"] == "sticky_hit_expected"
            assert task["last_history_sequence"] == sequence
            assert [e["sequence"] for e in task["history_events"]] == list(range(sequence + 1, 6))
        else:
            assert "sticky_replay_mode" not in task and len(task["history_events"]) == 5
            assert "sticky" not in server.engine.get_run(task["run_id"])


def test_a_closing_completion_writes_the_run_once_with_its_claim() -> None:
    with DevServer(port=0) as server:
        raw = Raw(server.url)
        task = _second_task(raw, 2)
        statements: List[str] = []
        server.engine.store._conn.set_trace_callback(statements.append)
        receipt = _complete(raw, task, [{"type": "complete_workflow", "result": envelope("done")}], 5)
        server.engine.store._conn.set_trace_callback(None)
        assert receipt["run_status"] == "completed"
        assert len([s for s in statements if s.startswith("UPDATE runs")]) == 1, statements
        run = server.engine.get_run(task["run_id"])
        assert run is not None and run["status"] == "completed"
        assert run["sticky"]["sequence"] == 5 and run["sticky"]["worker_id"] == "w1"
