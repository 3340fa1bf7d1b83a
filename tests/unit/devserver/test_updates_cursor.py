"""Update idempotency and the instance message cursor, over real sockets.

Pins what ServerParity ``state-updates`` and the engine's ``MessageStreamCursor`` describe: a
repeated update ``request_id`` with other arguments returns the original update and result
with no extra history; accepted signals and updates reserve ordered positions of one instance
stream, consumed one per workflow task in that order; ``MessageCursorAdvanced`` comes right after
``UpdateCompleted`` and right before ``SignalApplied`` (the worker's contract declares an update, so
the signal's cursor event is recorded too), and never moves backwards.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker.devserver import DevServer
from sync_worker.payloads import decode_envelope, envelope
from tests.unit.devserver._raw import Raw

CONTRACT = {"queries": [], "signals": ["finish"], "updates": ["set_payload"], "update_validators": []}


@pytest.fixture
def raw() -> Iterator[Raw]:
    with DevServer(workflow_task_lease_seconds=30) as server:
        raw = Raw(server.url)
        raw.ok("POST", "/worker/register", {"worker_id": "w1", "task_queue": "q", "supported_workflow_types": ["t"],
                                            "workflow_command_contracts": {"t": CONTRACT}}, plane="worker")
        yield raw


def _waiting(raw: Raw, workflow_id: str) -> None:
    raw.start(workflow_id)
    raw.complete(raw.poll(), [{"type": "open_condition_wait", "condition_key": "finish"}])


def _update(raw: Raw, workflow_id: str, value: Any, request_id: str, wait_for: str = "accepted") -> Dict[str, Any]:
    resp = raw.call("POST", f"/workflows/{workflow_id}/update/set_payload",
                    {"input": envelope([value]), "request_id": request_id, "wait_for": wait_for,
                     "wait_timeout_seconds": 5})
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def _cursor_events(raw: Raw, workflow_id: str) -> List[Dict[str, Any]]:
    return [e["payload"] for e in raw.history(workflow_id) if e["event_type"] == "MessageCursorAdvanced"]


def _run_update_task(raw: Raw, result: Any) -> None:
    task = raw.poll(timeout=2)
    assert task is not None and task["workflow_update_id"]
    assert raw.complete(task, [{"type": "complete_update", "update_id": task["workflow_update_id"],
                                "result": envelope(result)}]).status_code == 200


def test_repeated_request_id_returns_the_original_update_and_result(raw: Raw) -> None:
    _waiting(raw, "wf-u")
    first = _update(raw, "wf-u", {"message": "first update λ", "number": 9007199254740993}, "req-1")
    events_before = raw.history("wf-u")
    again = _update(raw, "wf-u", {"message": "duplicate must not apply"}, "req-1")
    assert again["update_id"] == first["update_id"] and again["retained"] is True
    assert raw.history("wf-u") == events_before  # nothing recorded for the repeat

    _run_update_task(raw, {"applied": 1})
    after = _update(raw, "wf-u", {"message": "duplicate must not apply"}, "req-1", wait_for="completed")
    assert after["update_id"] == first["update_id"] and after["update_status"] == "completed"
    assert decode_envelope(after["result_envelope"]) == {"applied": 1}
    accepted = [e["payload"] for e in raw.history("wf-u") if e["event_type"] == "UpdateAccepted"]
    assert len(accepted) == 1
    assert decode_envelope(accepted[0]["arguments"]) == [{"message": "first update λ", "number": 9007199254740993}]
    history = raw.history("wf-u")
    _update(raw, "wf-u", {"message": "still a duplicate"}, "req-1", wait_for="completed")
    assert raw.history("wf-u") == history


def test_updates_and_signals_share_one_ordered_cursor(raw: Raw) -> None:
    _waiting(raw, "wf-c")
    _update(raw, "wf-c", {"n": 1}, "u-1")
    _run_update_task(raw, "one")
    _update(raw, "wf-c", {"n": 2}, "u-2")
    _run_update_task(raw, "two")
    raw.ok("POST", "/workflows/wf-c/signal/finish", {"input": envelope([{"finish": True}])})
    task = raw.poll(timeout=2)
    raw.complete(task, [{"type": "complete_workflow", "result": envelope("done")}])
    assert raw.types("wf-c")[2:] == [
        "ConditionWaitOpened", "UpdateAccepted", "UpdateApplied", "UpdateCompleted", "MessageCursorAdvanced",
        "UpdateAccepted", "UpdateApplied", "UpdateCompleted", "MessageCursorAdvanced", "SignalReceived",
        "MessageCursorAdvanced", "SignalApplied", "ConditionWaitSatisfied", "WorkflowCompleted"]
    assert _cursor_events(raw, "wf-c") == [
        {"stream_key": "instance:wf-c", "previous_position": 0, "new_position": 1},
        {"stream_key": "instance:wf-c", "previous_position": 1, "new_position": 2},
        {"stream_key": "instance:wf-c", "previous_position": 2, "new_position": 3}]


def test_an_update_waits_behind_an_earlier_signal_and_queries_do_not_move_the_cursor(raw: Raw) -> None:
    _waiting(raw, "wf-o")
    raw.ok("POST", "/workflows/wf-o/signal/finish", {"input": envelope([1])})  # position 1
    _update(raw, "wf-o", {"n": 1}, "u-late")  # position 2: applied after the signal, by its own task
    task = raw.poll(timeout=2)
    assert task["resume_source_kind"] == "workflow_signal" and "workflow_update_id" not in task
    raw.complete(task, [{"type": "open_condition_wait", "condition_key": "finish"}])
    _run_update_task(raw, "ok")
    assert _cursor_events(raw, "wf-o") == [
        {"stream_key": "instance:wf-o", "previous_position": 0, "new_position": 1},
        {"stream_key": "instance:wf-o", "previous_position": 1, "new_position": 2}]
    kinds = raw.types("wf-o")
    assert kinds[kinds.index("SignalApplied") - 1] == "MessageCursorAdvanced"
    assert kinds.index("SignalApplied") < kinds.index("UpdateApplied")

    answers: List[Any] = []
    thread = threading.Thread(target=lambda: answers.append(
        raw.call("POST", "/workflows/wf-o/query/state", {"input": envelope([])})))
    thread.start()
    query = raw.poll(kind="query", timeout=5)
    raw.ok("POST", f"/worker/query-tasks/{query['query_task_id']}/complete",
           {"result": envelope("s"), "lease_owner": query.get("lease_owner")}, plane="worker")
    thread.join(10)
    assert answers[0].status_code == 200
    assert len(_cursor_events(raw, "wf-o")) == 2


def test_a_failed_update_also_advances_the_cursor(raw: Raw) -> None:
    _waiting(raw, "wf-f")
    _update(raw, "wf-f", {"n": 1}, "u-f")
    task = raw.poll(timeout=2)
    raw.complete(task, [{"type": "fail_update", "update_id": task["workflow_update_id"], "message": "no"}])
    assert raw.types("wf-f")[-2:] == ["UpdateCompleted", "MessageCursorAdvanced"]
