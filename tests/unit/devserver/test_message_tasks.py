"""One message per workflow task, in message order, over real sockets.

The engine's ``PendingMessageTask::createForRun`` / ``WorkflowTaskPayload::forSignal`` /
``forUpdate``: a claimed task takes the run's earliest unapplied signal or pending update (an
update waits behind every earlier signal), the poll says which (the PHP server's
``workflowTaskResumeContext``), the next message gets the next task; update tasks complete with
exactly their one update outcome (the Rust port's ``update_task_mismatch``). A failed, expired or
recovered signal task leaves its signal unapplied and it is offered again; one the worker released
as waiting for history applied it (the PHP server's acknowledgment).
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker.devserver import DevServer
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import Raw
from tests.unit.devserver._tasks import (
    SIGNALS_ONLY,
    WAIT,
    WITH_UPDATE,
    complete_update,
    ok,
    payloads,
    register,
    signal,
    update,
)

RESUME_KEYS = ("resume_source_kind", "resume_source_id", "workflow_signal_id", "signal_name", "workflow_command_id",
               "workflow_update_id")


@pytest.fixture
def raw() -> Iterator[Raw]:
    with DevServer(workflow_task_lease_seconds=30) as server:
        raw = Raw(server.url)
        register(raw, WITH_UPDATE)
        yield raw


def _resume(task: Dict[str, Any]) -> Dict[str, Any]:
    return {k: task[k] for k in RESUME_KEYS if k in task}


def _waiting(raw: Raw, workflow_id: str) -> Dict[str, Any]:
    raw.start(workflow_id)
    first = raw.poll()
    assert _resume(first) == {"resume_source_kind": "workflow_start"}
    ok(raw, first, [WAIT])
    return dict(first)


def test_a_signal_task_names_its_signal_and_a_repeated_poll_renders_it_again(raw: Raw) -> None:
    _waiting(raw, "wf-1")
    accepted = signal(raw, "wf-1", "one")
    body = {"worker_id": "w1", "task_queue": "q", "timeout_seconds": 2, "poll_request_id": "wf-poll-same"}
    task = raw.ok("POST", "/worker/workflow-tasks/poll", body, plane="worker")["task"]
    received = payloads(raw, "wf-1", "SignalReceived")[0]
    assert _resume(task) == {"resume_source_kind": "workflow_signal", "resume_source_id": accepted["signal_id"],
                             "workflow_signal_id": received["signal_id"], "signal_name": "payload",
                             "workflow_command_id": received["workflow_command_id"]}
    again = raw.ok("POST", "/worker/workflow-tasks/poll", body, plane="worker")["task"]
    assert (again["task_id"], _resume(again)) == (task["task_id"], _resume(task))
    ok(raw, task, [{"type": "complete_workflow", "result": envelope("one")}])
    assert raw.types("wf-1") == ["StartAccepted", "WorkflowStarted", "ConditionWaitOpened", "SignalReceived",
                                 "MessageCursorAdvanced", "SignalApplied", "ConditionWaitSatisfied",
                                 "WorkflowCompleted"]


def test_plain_tasks_say_workflow_history(raw: Raw) -> None:
    raw.start("wf-h")
    first = raw.poll()
    ok(raw, first, [{"type": "start_timer", "delay_seconds": 0}])
    later = raw.poll(timeout=5)
    assert _resume(later) == {"resume_source_kind": "workflow_history"}


def test_two_signals_accepted_during_a_lease_get_a_task_each(raw: Raw) -> None:
    raw.start("wf-2")
    leased = raw.poll()
    first, second = signal(raw, "wf-2", "a"), signal(raw, "wf-2", "b")
    assert raw.poll(timeout=0) is None  # at most one outstanding task per run
    ok(raw, leased, [WAIT])
    task_a = raw.poll()
    assert task_a["workflow_signal_id"] == first["signal_id"]
    ok(raw, task_a, [WAIT])  # the predicate is still false: the same wait again
    task_b = raw.poll()
    assert task_b["workflow_signal_id"] == second["signal_id"]
    ok(raw, task_b, [{"type": "complete_workflow", "result": envelope("ab")}])
    assert raw.types("wf-2")[2:] == [
        "SignalReceived", "SignalReceived", "ConditionWaitOpened",
        "MessageCursorAdvanced", "SignalApplied", "ConditionWaitSatisfied", "ConditionWaitOpened",
        "MessageCursorAdvanced", "SignalApplied", "ConditionWaitSatisfied", "WorkflowCompleted"]
    applied = payloads(raw, "wf-2", "SignalApplied")
    assert [a["signal_id"] for a in applied] == [first["signal_id"], second["signal_id"]]
    satisfied = payloads(raw, "wf-2", "ConditionWaitSatisfied")
    assert [s["workflow_signal_id"] for s in satisfied] == [first["signal_id"], second["signal_id"]]
    opened = payloads(raw, "wf-2", "ConditionWaitOpened")
    assert [s["condition_wait_id"] for s in satisfied] == [o["condition_wait_id"] for o in opened]
    assert len({o["condition_wait_id"] for o in opened}) == 2


def test_signal_update_signal_are_applied_in_message_order(raw: Raw) -> None:
    _waiting(raw, "wf-3")
    s1 = signal(raw, "wf-3", 1)
    u = update(raw, "wf-3", 2)
    s2 = signal(raw, "wf-3", 3)
    seen: List[Any] = []
    for _ in range(3):
        task = raw.poll()
        seen.append(task.get("workflow_signal_id") or task.get("workflow_update_id"))
        if task.get("workflow_update_id"):
            ok(raw, task, complete_update(task))
        else:
            ok(raw, task, [WAIT])
    assert seen == [s1["signal_id"], u["update_id"], s2["signal_id"]]
    assert raw.types("wf-3")[2:] == [
        "ConditionWaitOpened", "SignalReceived", "UpdateAccepted", "SignalReceived",
        "MessageCursorAdvanced", "SignalApplied", "ConditionWaitSatisfied", "ConditionWaitOpened",
        "UpdateApplied", "UpdateCompleted", "MessageCursorAdvanced",
        "MessageCursorAdvanced", "SignalApplied", "ConditionWaitSatisfied", "ConditionWaitOpened"]
    positions = [(c["previous_position"], c["new_position"]) for c in payloads(raw, "wf-3", "MessageCursorAdvanced")]
    assert positions == [(0, 1), (1, 2), (2, 3)]
    assert raw.poll(timeout=0) is None


def test_update_events_share_the_next_authored_sequence(raw: Raw) -> None:
    _waiting(raw, "wf-seq")  # the wait is authored sequence 1
    for value in (1, 2):
        update(raw, "wf-seq", value)
        task = raw.poll()
        ok(raw, task, complete_update(task, value))
        ok(raw, raw.poll(), [WAIT])  # the plain task after the update: the same wait, nothing recorded
    applied = payloads(raw, "wf-seq", "UpdateApplied")
    completed = payloads(raw, "wf-seq", "UpdateCompleted")
    assert [a["sequence"] for a in applied] == [c["sequence"] for c in completed] == [2, 2]
    assert raw.types("wf-seq").count("ConditionWaitOpened") == 1


@pytest.mark.parametrize("commands", [
    lambda task: [*complete_update(task), WAIT],
    lambda task: [{"type": "complete_update", "update_id": "upd-other", "result": envelope(1)}],
    lambda task: [WAIT],
    lambda task: [{"type": "complete_workflow", "result": envelope(1)}],
], ids=["extra-command", "other-update", "no-outcome", "terminal-instead"])
def test_an_update_task_completes_with_exactly_its_update_outcome(raw: Raw, commands: Any) -> None:
    _waiting(raw, "wf-u")
    update(raw, "wf-u", 1)
    task = raw.poll()
    before = raw.history("wf-u")
    refused = raw.complete(task, commands(task))
    assert (refused.status_code, refused.json()["reason"]) == (409, "update_task_mismatch")
    assert task["workflow_update_id"] in refused.json()["error"]
    assert raw.history("wf-u") == before
    ok(raw, task, [{"type": "fail_update", "update_id": task["workflow_update_id"], "message": "no"}])
    assert raw.types("wf-u")[-2:] == ["UpdateCompleted", "MessageCursorAdvanced"]


def test_a_task_without_an_update_refuses_an_update_outcome(raw: Raw) -> None:
    _waiting(raw, "wf-x")
    signal(raw, "wf-x", 1)
    task = raw.poll()
    refused = raw.complete(task, [{"type": "complete_update", "update_id": "upd-x", "result": envelope(1)}])
    assert (refused.status_code, refused.json()["reason"]) == (409, "update_task_mismatch")
    assert raw.types("wf-x")[-1] == "SignalReceived"


WAITING = {"message": "Workflow task waiting for scheduled history.", "type": "WorkflowTaskWaitingForHistory"}


def test_released_signal_tasks_apply_their_signal_and_the_next_message_follows(raw: Raw) -> None:
    """As the PHP server's ``test_waiting_for_history_acknowledgments_advance_declared_signals_then_an_update``:
    the run waits on a timer; each signal task the worker releases as waiting for history applies
    its signal, and the next message (a signal, then an update) gets its task at once."""
    raw.start("wf-r")
    ok(raw, raw.poll(), [{"type": "start_timer", "delay_seconds": 300}])
    sent = [signal(raw, "wf-r", n)["signal_id"] for n in (3, 5)]
    for signal_id in sent:
        task = raw.poll(timeout=0)
        assert (task["resume_source_kind"], task["workflow_signal_id"]) == ("workflow_signal", signal_id)
        assert raw.fail(task, WAITING).json()["outcome"] == "released"
    accepted = update(raw, "wf-r", 13)
    task = raw.poll(timeout=0)
    assert task["workflow_update_id"] == accepted["update_id"]
    ok(raw, task, complete_update(task))
    assert [p["signal_id"] for p in payloads(raw, "wf-r", "SignalApplied")] == sent
    assert raw.types("wf-r")[2:] == [
        "TimerScheduled", "SignalReceived", "SignalReceived", "MessageCursorAdvanced", "SignalApplied",
        "MessageCursorAdvanced", "SignalApplied", "UpdateAccepted", "UpdateApplied", "UpdateCompleted",
        "MessageCursorAdvanced"]
    assert raw.poll(timeout=0) is None  # nothing else to do until the timer fires


def test_a_released_update_task_keeps_its_update_for_the_next_wake(raw: Raw) -> None:
    raw.start("wf-ru")
    ok(raw, raw.poll(), [{"type": "start_timer", "delay_seconds": 1}])
    accepted = update(raw, "wf-ru", 1)
    task = raw.poll(timeout=0)
    assert raw.fail(task, WAITING).json()["outcome"] == "released"
    assert raw.poll(timeout=0) is None  # not handed out again and again while the run is blocked
    again = raw.poll(timeout=5)  # the timer fires: the run's next task carries the update
    assert again["workflow_update_id"] == accepted["update_id"] and "TimerFired" in raw.types("wf-ru")
    ok(raw, again, complete_update(again))
    assert raw.types("wf-ru").count("UpdateApplied") == 1


def test_a_failed_signal_task_offers_the_same_signal_on_its_next_attempt(raw: Raw) -> None:
    _waiting(raw, "wf-f")
    sent = signal(raw, "wf-f", 1)
    task = raw.poll()
    raw.fail(task, {"message": "boom", "type": "RuntimeError"})
    retry = raw.poll(timeout=5)
    assert (retry["task_id"], retry["workflow_task_attempt"]) == (task["task_id"], 2)
    assert retry["workflow_signal_id"] == sent["signal_id"]
    assert "SignalApplied" not in raw.types("wf-f")


def test_an_expired_or_recovered_signal_task_offers_the_same_signal() -> None:
    with DevServer(workflow_task_lease_seconds=0.5, tick_seconds=0.02) as server:
        raw = Raw(server.url)
        register(raw, SIGNALS_ONLY)
        _waiting(raw, "wf-e")
        sent = signal(raw, "wf-e", 1)
        task = raw.poll()
        time.sleep(0.8)  # the lease expires
        again = raw.poll(timeout=5)
        assert (again["workflow_task_attempt"], again["workflow_signal_id"]) == (2, sent["signal_id"])
        raw.ok("DELETE", "/worker/registrations/w1", plane="worker")  # deregistration recovers the lease
        register(raw, SIGNALS_ONLY, worker_id="w2")
        third = raw.poll(worker_id="w2", timeout=5)
        assert (third["workflow_task_attempt"], third["workflow_signal_id"]) == (3, sent["signal_id"])
        assert raw.complete(task, [WAIT]).status_code == 409  # the first attempt is fenced off
        ok(raw, third, [{"type": "complete_workflow", "result": envelope(1)}])
        assert len(payloads(raw, "wf-e", "SignalApplied")) == 1


def test_a_restart_from_the_file_keeps_one_message_per_task() -> None:
    path = os.path.join(tempfile.mkdtemp(), f"{uuid.uuid4().hex}.sqlite")
    with DevServer(db=path, workflow_task_lease_seconds=0.5, tick_seconds=0.02) as server:
        raw = Raw(server.url)
        register(raw, SIGNALS_ONLY)
        _waiting(raw, "wf-db")
        sent = [signal(raw, "wf-db", n)["signal_id"] for n in (1, 2)]
        leased = raw.poll()
        assert leased["workflow_signal_id"] == sent[0]
    with DevServer(db=path, workflow_task_lease_seconds=30, tick_seconds=0.02) as server:
        raw = Raw(server.url)
        register(raw, SIGNALS_ONLY)
        first = raw.poll(timeout=5)  # the lease taken before the restart expired
        assert (first["task_id"], first["workflow_signal_id"]) == (leased["task_id"], sent[0])
        ok(raw, first, [WAIT])
        second = raw.poll()
        assert second["workflow_signal_id"] == sent[1]
        ok(raw, second, [{"type": "complete_workflow", "result": envelope(2)}])
        assert [p["signal_id"] for p in payloads(raw, "wf-db", "SignalApplied")] == sent
