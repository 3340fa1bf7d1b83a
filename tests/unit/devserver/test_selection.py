"""The dev server resolves durable selections as the real server does (``devserver/selection.py``).

Driven over raw HTTP with the commands our replayer sends for
``ctx.select({"a": activity, "pair": [activity, activity], "t": timer(600)})``: the first member to
finish is committed once as ``SelectionResolved`` (a nested list counts only once all its leaves
succeeded, or at its first failure); later closings never add a second verdict and wake the run
once the member is finished (a waiting run at once, a leased task's run after that task); and
``cancel_selection_operation`` cancels what is still open of a member and records
``SelectionOperationCancelled`` (a malformed one is a 422).
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional

import pytest

from sync_worker import workflow as wf
from sync_worker.devserver import DevServer
from sync_worker.payloads import decode_envelope, envelope
from sync_worker.worker.workflow_tasks import WAITING_FOR_HISTORY_FAILURE as WAITING
from tests.unit.devserver._raw import Raw
from tests.unit.devserver._tasks import ok, payloads, register
from tests.unit.workflow._helpers import started


@wf.defn(name="t")
class _Race:
    def run(self, ctx: Any) -> Any:
        chosen = yield ctx.select({"a": ctx.schedule_activity("act", [1]),
                                   "pair": [ctx.schedule_activity("act", [2]), ctx.schedule_activity("act", [3])],
                                   "t": ctx.start_timer(600)})
        return chosen.key


COMMANDS = [c.to_wire("q") for c in wf.replay(_Race, [started()], []).commands]


@pytest.fixture
def raw() -> Iterator[Raw]:
    with DevServer(workflow_task_lease_seconds=30, tick_seconds=0.02) as srv:
        client = Raw(srv.url)
        register(client, None)
        yield client


def _started(raw: Raw, workflow_id: str) -> Dict[int, Dict[str, Any]]:
    """Start the race; the activity tasks keyed by their argument (1, 2, 3)."""
    raw.start(workflow_id)
    ok(raw, raw.poll(), COMMANDS)
    tasks: Dict[int, Dict[str, Any]] = {}
    while len(tasks) < 3:
        task = raw.poll(kind="activity")
        assert task is not None
        tasks[decode_envelope(task["arguments"])[0]] = task
    return tasks


def _finish(raw: Raw, task: Dict[str, Any], error: Optional[str] = None) -> None:
    claim = {"activity_attempt_id": task["activity_attempt_id"], "lease_owner": task["lease_owner"]}
    if error is None:
        body: Dict[str, Any] = {**claim, "result": envelope(f"done {task['activity_attempt_id']}")}
        op = "complete"
    else:
        body = {**claim, "failure": {"message": error, "exception_class": "Boom", "non_retryable": True}}
        op = "fail"
    resp = raw.call("POST", f"/worker/activity-tasks/{task['task_id']}/{op}", body, plane="worker")
    assert resp.status_code == 200, resp.text


def _verdicts(raw: Raw, workflow_id: str) -> List[Dict[str, Any]]:
    return payloads(raw, workflow_id, "SelectionResolved")


def test_the_first_member_wins_once_and_a_late_loser_wakes_a_waiting_run(raw: Raw) -> None:
    tasks = _started(raw, "w-single")
    assert raw.poll(timeout=1) is None  # a selection is not a barrier, and nothing finished yet
    _finish(raw, tasks[1])
    events = raw.history("w-single")
    done = next(e for e in events if e["event_type"] == "ActivityCompleted")
    verdict = _verdicts(raw, "w-single")
    assert verdict == [{
        "selection_group_id": "select-calls:1:4", "selection_group_base_sequence": 1, "selection_group_size": 4,
        "member_key": "a", "member_index": 0, "member_base_sequence": 1, "member_size": 1,
        "operation_kind": "activity", "operation_identity": tasks[1]["activity_execution_id"],
        "outcome": "completed", "resolution_event_id": done["id"], "resolution_event_type": "ActivityCompleted"}]
    woken = raw.poll()
    assert woken is not None
    # the code awaits a loser through its handle: nothing to record, the run waits
    assert raw.fail(woken, WAITING).status_code == 200
    _finish(raw, tasks[2])
    assert raw.poll(timeout=1) is None  # half of the nested list: that member is not finished yet
    _finish(raw, tasks[3])
    assert len(_verdicts(raw, "w-single")) == 1
    assert raw.poll() is not None  # a loser finishing wakes a waiting run with no task outstanding


def test_a_nested_list_wins_when_all_its_leaves_succeed(raw: Raw) -> None:
    tasks = _started(raw, "w-pair")
    _finish(raw, tasks[2])
    assert _verdicts(raw, "w-pair") == [] and raw.poll(timeout=1) is None
    _finish(raw, tasks[3])
    last = [e for e in raw.history("w-pair") if e["event_type"] == "ActivityCompleted"][-1]
    (verdict,) = _verdicts(raw, "w-pair")
    assert (verdict["member_key"], verdict["operation_kind"], verdict["operation_identity"]) == (
        "pair", "group", "group:2:2")
    assert (verdict["outcome"], verdict["resolution_event_id"]) == ("completed", last["id"])
    _finish(raw, tasks[1])
    assert len(_verdicts(raw, "w-pair")) == 1


def test_a_nested_list_fails_the_selection_at_its_first_failure(raw: Raw) -> None:
    tasks = _started(raw, "w-fail")
    _finish(raw, tasks[3], error="no")
    failed = next(e for e in raw.history("w-fail") if e["event_type"] == "ActivityFailed")
    (verdict,) = _verdicts(raw, "w-fail")
    assert (verdict["member_key"], verdict["outcome"], verdict["resolution_event_id"],
            verdict["resolution_event_type"]) == ("pair", "failed", failed["id"], "ActivityFailed")


def test_cancelling_a_member_cancels_what_is_open_and_records_it(raw: Raw) -> None:
    tasks = _started(raw, "w-cancel")
    _finish(raw, tasks[1])
    task = raw.poll()
    timer = next(c for c in COMMANDS if c["type"] == "start_timer")["parallel_group_path"][0]
    timer_id = next(e for e in raw.history("w-cancel") if e["event_type"] == "TimerScheduled")["payload"]["timer_id"]
    cancel = {"type": "cancel_selection_operation", "selection_group_id": "select-calls:1:4", "member_key": "t",
              "member_index": timer["selection_member_index"], "member_base_sequence": 4, "member_size": 1,
              "operation_kind": "timer", "operation_identity": timer_id}
    bad = raw.complete(task, [{**cancel, "member_base_sequence": 0}])
    assert bad.status_code == 422 and "member_base_sequence" in bad.text
    ok(raw, task, [cancel])
    types = raw.types("w-cancel")
    assert types.index("TimerCancelled") < types.index("SelectionOperationCancelled")
    assert payloads(raw, "w-cancel", "SelectionOperationCancelled") == [
        {k: v for k, v in cancel.items() if k != "type"}]
    assert payloads(raw, "w-cancel", "TimerCancelled")[0]["sequence"] == 4
    assert raw.poll() is not None  # one more task: the code may be awaiting the cancelled member


def test_a_loser_closing_during_a_leased_task_gets_the_run_another_task(raw: Raw) -> None:
    """The leased task's history predates the loser's closing: after that task the run gets one more
    (the dev server's rule where the real server wakes only a waiting run with no task outstanding)."""
    tasks = _started(raw, "w-leased")
    _finish(raw, tasks[1])
    leased = raw.poll()
    _finish(raw, tasks[2])
    _finish(raw, tasks[3])  # the pair, the last loser, closes while the task is leased
    assert raw.fail(leased, WAITING).status_code == 200
    again = raw.poll()
    assert again is not None and again["task_id"] != leased["task_id"]


def test_cancelling_a_list_member_cancels_each_open_activity(raw: Raw) -> None:
    tasks = _started(raw, "w-cancel-pair")
    _finish(raw, tasks[1])
    task = raw.poll()
    cancel = {"type": "cancel_selection_operation", "selection_group_id": "select-calls:1:4", "member_key": "pair",
              "member_index": 1, "member_base_sequence": 2, "member_size": 2, "operation_kind": "group",
              "operation_identity": "group:2:2"}
    ok(raw, task, [cancel])
    cancelled = payloads(raw, "w-cancel-pair", "ActivityCancelled")
    assert sorted(p["sequence"] for p in cancelled) == [2, 3]
    assert {p["reason"] for p in cancelled} == {"selection_operation_cancelled"}
    late = raw.call("POST", f"/worker/activity-tasks/{tasks[2]['task_id']}/complete",
                    {"activity_attempt_id": tasks[2]["activity_attempt_id"], "lease_owner": tasks[2]["lease_owner"],
                     "result": envelope("too late")}, plane="worker")
    assert late.status_code >= 400  # the attempt was cancelled: its late result is refused
    assert raw.types("w-cancel-pair").count("ActivityCompleted") == 1  # only the winner's
