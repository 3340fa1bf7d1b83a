"""What a completion records for its signal and the open condition wait, and the message cursor rule.

A signal task records (the engine bridge's ``recordAppliedSignalForSignalResume`` then
``recordSatisfiedConditionWaitForSignalResume``) the cursor advance when the worker's contract
declares a query or update, ``SignalApplied`` for its one signal, and ``ConditionWaitSatisfied``
for the open wait even when the completion re-opens it (a fresh ``ConditionWaitOpened``). A plain
task that re-emits the same open wait records nothing. The inventories are the ServerParity ones:
``one-signal`` / ``repeated-signal`` (signals only: no cursor event), ``state-queries`` (a query:
one per signal) and ``state-updates`` (updates: one per update and per signal).
"""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Optional

import pytest

from sync_worker.devserver import DevServer
from sync_worker.payloads import envelope
from tests._fixtures import FIXTURES_DIR, load_fixture
from tests.unit.devserver._raw import Raw
from tests.unit.devserver._tasks import (
    SIGNALS_ONLY,
    WAIT,
    WITH_QUERY,
    WITH_UPDATE,
    complete_update,
    ok,
    payloads,
    register,
    signal,
    update,
)

PARITY = "server-index/tests/Fixtures/ServerParity"
DONE = {"type": "complete_workflow", "result": envelope("done")}


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer(workflow_task_lease_seconds=30, tick_seconds=0.02) as srv:
        yield srv


def _wait(index: int, timeout: Optional[int] = None) -> Dict[str, Any]:
    cmd: Dict[str, Any] = {"type": "open_condition_wait", "condition_key": f"payload:{index}",
                           "condition_definition_fingerprint": f"sha256:{index}"}
    if timeout is not None:
        cmd["timeout_seconds"] = timeout
    return cmd


def _signals_run(raw: Raw, workflow_id: str, count: int) -> None:
    """``parity.v1.signals`` / ``parity.v1.queries`` as the probe drives them: a wait per delivery,
    the next signal sent once the previous task committed."""
    raw.start(workflow_id)
    ok(raw, raw.poll(), [_wait(0)])
    for index in range(count):
        signal(raw, workflow_id, index)
        task = raw.poll()
        assert task["resume_source_kind"] == "workflow_signal"
        ok(raw, task, [_wait(index + 1)] if index + 1 < count else [DONE])


def _fixture_events(name: str) -> Optional[List[str]]:
    if not (FIXTURES_DIR / PARITY / f"{name}.json").is_file():
        return None
    return list(load_fixture(f"{PARITY}/{name}.json")["expected_events"])


ONE_SIGNAL = ["StartAccepted", "WorkflowStarted", "ConditionWaitOpened", "SignalReceived", "SignalApplied",
              "ConditionWaitSatisfied", "WorkflowCompleted"]
REPEATED_SIGNAL = ["StartAccepted", "WorkflowStarted", "ConditionWaitOpened", "SignalReceived", "SignalApplied",
                   "ConditionWaitSatisfied", "ConditionWaitOpened", "SignalReceived", "SignalApplied",
                   "ConditionWaitSatisfied", "WorkflowCompleted"]
STATE_QUERIES = ["StartAccepted", "WorkflowStarted", "ConditionWaitOpened", "SignalReceived",
                 "MessageCursorAdvanced", "SignalApplied", "ConditionWaitSatisfied", "ConditionWaitOpened",
                 "SignalReceived", "MessageCursorAdvanced", "SignalApplied", "ConditionWaitSatisfied",
                 "WorkflowCompleted"]


@pytest.mark.parametrize("fixture, contract, count, expected", [
    ("one-signal", SIGNALS_ONLY, 1, ONE_SIGNAL),
    ("repeated-signal", SIGNALS_ONLY, 2, REPEATED_SIGNAL),
    ("state-queries", WITH_QUERY, 2, STATE_QUERIES),
])
def test_signal_inventories_follow_the_contract(server: DevServer, fixture: str, contract: Dict[str, Any],
                                                count: int, expected: List[str]) -> None:
    raw = Raw(server.url)
    register(raw, contract)
    _signals_run(raw, "wf", count)
    assert raw.types("wf") == expected
    recorded = _fixture_events(fixture)
    if recorded is not None:
        assert raw.types("wf") == recorded
    received = payloads(raw, "wf", "SignalReceived")
    applied = payloads(raw, "wf", "SignalApplied")
    satisfied = payloads(raw, "wf", "ConditionWaitSatisfied")
    opened = payloads(raw, "wf", "ConditionWaitOpened")
    for got, sent, wait, done in zip(applied, received, opened, satisfied):
        assert got == {"workflow_command_id": sent["workflow_command_id"], "signal_id": sent["signal_id"],
                       "signal_name": "payload", "workflow_instance_id": "wf",
                       "workflow_run_id": sent["workflow_run_id"]}
        assert (done["condition_wait_id"], done["condition_key"], done["sequence"]) == (
            wait["condition_wait_id"], wait["condition_key"], wait["sequence"])
        assert (done["workflow_signal_id"], done["signal_name"]) == (sent["signal_id"], "payload")
        assert done["condition_definition_fingerprint"] == wait["condition_definition_fingerprint"]
    cursors = payloads(raw, "wf", "MessageCursorAdvanced")
    assert cursors == ([{"stream_key": "instance:wf", "previous_position": i, "new_position": i + 1}
                        for i in range(count)] if contract is WITH_QUERY else [])


def test_state_updates_records_a_cursor_per_update_and_per_signal(server: DevServer) -> None:
    """``parity.v1.updates``: two updates while the wait is open, then the signal that satisfies it."""
    raw = Raw(server.url)
    register(raw, WITH_UPDATE)
    raw.start("wf")
    ok(raw, raw.poll(), [_wait(0)])
    for value in (1, 2):
        update(raw, "wf", value)
        task = raw.poll()
        assert task["resume_source_kind"] == "workflow_update"
        ok(raw, task, complete_update(task, {"value": value}))
        ok(raw, raw.poll(), [_wait(0)])  # the dev server's plain task after an update: nothing recorded
    signal(raw, "wf", "go")
    ok(raw, raw.poll(), [DONE])
    assert raw.types("wf") == [
        "StartAccepted", "WorkflowStarted", "ConditionWaitOpened",
        "UpdateAccepted", "UpdateApplied", "UpdateCompleted", "MessageCursorAdvanced",
        "UpdateAccepted", "UpdateApplied", "UpdateCompleted", "MessageCursorAdvanced",
        "SignalReceived", "MessageCursorAdvanced", "SignalApplied", "ConditionWaitSatisfied", "WorkflowCompleted"]
    assert [(c["previous_position"], c["new_position"]) for c in payloads(raw, "wf", "MessageCursorAdvanced")] == [
        (0, 1), (1, 2), (2, 3)]


def test_without_a_contract_only_updates_record_the_cursor_event(server: DevServer) -> None:
    raw = Raw(server.url)  # an unregistered poller: no contract
    raw.start("wf")
    ok(raw, raw.poll(), [WAIT])
    signal(raw, "wf", 1)
    ok(raw, raw.poll(), [WAIT])
    update(raw, "wf", 2)
    task = raw.poll()
    ok(raw, task, complete_update(task))
    assert [(c["previous_position"], c["new_position"]) for c in payloads(raw, "wf", "MessageCursorAdvanced")] == [
        (1, 2)]  # the signal still moved the position


@pytest.mark.parametrize("contract, expected", [
    (WITH_QUERY, [{"stream_key": "instance:wf", "previous_position": 0, "new_position": 1}]),
    (SIGNALS_ONLY, [{"stream_name": "inbox", "through_position": 1}]),
])
def test_a_stream_delivery_records_one_cursor_event(server: DevServer, contract: Dict[str, Any],
                                                    expected: List[Dict[str, Any]]) -> None:
    raw = Raw(server.url)
    register(raw, contract)
    raw.start("wf")
    ok(raw, raw.poll(), [WAIT])
    raw.ok("POST", "/workflows/wf/message-streams/inbox/messages", {"message_id": "m-1", "input": envelope([1])})
    task = raw.poll()
    assert (task["resume_source_kind"], task["signal_name"]) == ("workflow_signal", "__durable_workflow_message_stream")
    resp = raw.call("POST", f"/worker/workflow-tasks/{task['task_id']}/complete", {
        "lease_owner": task["lease_owner"], "workflow_task_attempt": task["workflow_task_attempt"],
        "commands": [DONE], "message_stream_cursors": [{"stream_name": "inbox", "through_position": 1}]},
        plane="worker")
    assert resp.status_code == 200, resp.text
    assert payloads(raw, "wf", "MessageCursorAdvanced") == expected
    assert raw.types("wf")[-4:] == ["MessageCursorAdvanced", "SignalApplied", "ConditionWaitSatisfied",
                                    "WorkflowCompleted"]


def test_a_signal_task_that_reopens_its_wait_records_satisfied_then_a_fresh_open(server: DevServer) -> None:
    raw = Raw(server.url)
    register(raw, SIGNALS_ONLY)
    raw.start("wf")
    ok(raw, raw.poll(), [_wait(0, timeout=1)])
    signal(raw, "wf", 1)
    ok(raw, raw.poll(), [_wait(0, timeout=30)])  # the same key and fingerprint: the predicate is still false
    assert raw.types("wf")[2:] == ["ConditionWaitOpened", "SignalReceived", "SignalApplied", "ConditionWaitSatisfied",
                                   "ConditionWaitOpened"]
    first, second = payloads(raw, "wf", "ConditionWaitOpened")
    satisfied = payloads(raw, "wf", "ConditionWaitSatisfied")[0]
    assert satisfied["condition_wait_id"] == first["condition_wait_id"] != second["condition_wait_id"]
    assert satisfied["timer_id"] and satisfied["timeout_seconds"] == 1
    assert second["sequence"] == first["sequence"] + 1
    time.sleep(1.4)  # the first wait's timeout was cancelled with it
    assert "TimerFired" not in raw.types("wf") and raw.poll(timeout=0) is None


def test_a_plain_task_that_reemits_the_open_wait_records_nothing(server: DevServer) -> None:
    raw = Raw(server.url)
    register(raw, WITH_UPDATE)
    raw.start("wf")
    ok(raw, raw.poll(), [_wait(0, timeout=1)])
    update(raw, "wf", 1)
    task = raw.poll()
    ok(raw, task, complete_update(task))
    plain = raw.poll()
    assert plain["resume_source_kind"] == "workflow_history"
    before = raw.history("wf")
    ok(raw, plain, [_wait(0, timeout=1)])
    assert raw.history("wf") == before  # no ConditionWaitOpened again, no ConditionWaitSatisfied
    timed_out = raw.poll(timeout=5)  # the wait kept its timeout from the first open
    fired = payloads(raw, "wf", "TimerFired")
    assert timed_out is not None and fired[0]["condition_wait_id"] == payloads(raw, "wf", "ConditionWaitOpened")[0][
        "condition_wait_id"]
    ok(raw, timed_out, [DONE])
    assert "ConditionWaitSatisfied" not in raw.types("wf")  # its timeout closed it


def test_a_plain_task_that_moves_on_records_satisfied_without_signal_fields(server: DevServer) -> None:
    raw = Raw(server.url)
    register(raw, WITH_UPDATE)
    raw.start("wf")
    ok(raw, raw.poll(), [WAIT])
    update(raw, "wf", 1)
    task = raw.poll()
    ok(raw, task, complete_update(task))
    ok(raw, raw.poll(), [DONE])  # the handler satisfied the wait
    assert raw.types("wf")[-2:] == ["ConditionWaitSatisfied", "WorkflowCompleted"]
    satisfied = payloads(raw, "wf", "ConditionWaitSatisfied")[0]
    assert "workflow_signal_id" not in satisfied and "signal_name" not in satisfied
    assert satisfied["condition_key"] == WAIT["condition_key"]
