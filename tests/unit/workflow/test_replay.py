"""Replay semantics (protocol §4.3): result queue, suppression, receivers, waits, versions, CAN, saga."""

from __future__ import annotations

import logging
from typing import Any, List, Optional

import pytest

from sync_worker import payloads, workflow
from sync_worker.errors import (
    ActivityFailed,
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    InvalidWorkflowDefinition,
    NonDeterministicReplayError,
    WorkflowCancelled,
    WorkflowEntryArgumentsMismatchError,
    WorkflowPayloadDecodeError,
)
from sync_worker.workflow import UnsupportedReplayHistory, replay

from ._helpers import activity_done, blob, ev, result_of, started, wire


@workflow.defn(name="t.sequence")
class Sequence:
    def run(self, ctx: Any, name: str) -> Any:
        a = yield ctx.schedule_activity("first", [name])
        b = yield ctx.schedule_activity("second", [a])
        return [a, b]


def test_new_run_schedules_the_first_activity_only() -> None:
    commands = wire(Sequence, [started()], ["x"])
    assert [c["type"] for c in commands] == ["schedule_activity"]
    assert commands[0]["activity_type"] == "first"


def test_results_are_sent_back_in_order() -> None:
    history = [started(), *activity_done(1, "first", "A"), *activity_done(2, "second", "B")]
    assert result_of(wire(Sequence, history, ["x"])) == ["A", "B"]


def test_pending_step_is_not_reissued() -> None:
    # A signal (unknown here, so ignored) woke the run while "second" is still running.
    history = [started(), *activity_done(1, "first", "A"), ev("ActivityScheduled", sequence=2, activity_type="second"),
               ev("ActivityStarted", sequence=2, activity_type="second"),
               ev("SignalReceived", signal_name="nobody-listens", value=blob([1]))]
    assert wire(Sequence, history, ["x"]) == []


def test_changed_activity_type_is_non_deterministic_with_a_clear_message() -> None:
    history = [started(), *activity_done(1, "renamed", "A")]
    with pytest.raises(NonDeterministicReplayError) as caught:
        replay(Sequence, history, ["x"])
    message = str(caught.value)
    assert "workflow sequence 1" in message
    assert "['ActivityScheduled', 'ActivityCompleted']" in message
    assert "activity:first" in message and "'renamed'" in message
    assert caught.value.workflow_sequence == 1


def test_changed_shape_names_sequence_event_types_and_yielded_shape() -> None:
    history = [started(), ev("TimerScheduled", sequence=1, delay_seconds=5), ev("TimerFired", sequence=1)]
    with pytest.raises(NonDeterministicReplayError, match=r"sequence 1 recorded \['TimerScheduled', 'TimerFired'\], "
                                                          r"but the current workflow yielded activity\."):
        replay(Sequence, history, ["x"])


def test_unconsumed_history_at_completion_is_non_deterministic() -> None:
    @workflow.defn(name="t.short")
    class Short:
        def run(self, ctx: Any) -> Any:
            return (yield ctx.schedule_activity("first", []))

    history = [started(), *activity_done(1, "first", "A"), *activity_done(2, "extra", "B")]
    with pytest.raises(NonDeterministicReplayError, match="yielded complete workflow"):
        replay(Short, history, [])


@workflow.defn(name="t.failures")
class Failures:
    def run(self, ctx: Any) -> Any:
        caught: List[Any] = []
        try:
            yield ctx.schedule_activity("charge", [])
        except ActivityFailed as failure:
            caught.append([failure.activity_type, failure.exception_type, failure.exception_class,
                           failure.non_retryable, failure.step_sequence, str(failure)])
        try:
            yield ctx.start_child_workflow("kid", [])
        except ChildWorkflowCancelled as failure:
            caught.append(["cancelled", failure.failure_kind, failure.child_workflow_run_id])
        try:
            yield ctx.start_child_workflow("kid", [])
        except ChildWorkflowFailed as failure:
            caught.append(["failed", failure.exception_class, str(failure)])
        return caught


def test_failure_events_are_thrown_as_typed_errors() -> None:
    history = [started(),
               ev("ActivityFailed", sequence=1, activity_type="charge", exception={
                   "message": "declined", "type": "Declined", "class": "billing.Declined"}, non_retryable=True),
               ev("ChildRunCancelled", sequence=2, child_workflow_run_id="kid-run"),
               ev("ChildRunFailed", sequence=3, message="boom", exception_class="kids.Boom")]
    assert result_of(wire(Failures, history)) == [
        ["charge", "Declined", "billing.Declined", True, 1, "declined"],
        ["cancelled", "cancelled", "kid-run"],
        ["failed", "kids.Boom", "boom"],
    ]


def test_activity_timeout_is_an_activity_failure_too() -> None:
    @workflow.defn(name="t.uncaught")
    class Uncaught:
        def run(self, ctx: Any) -> Any:
            return (yield ctx.schedule_activity("slow", []))

    history = [started(), ev("ActivityTimedOut", sequence=1, activity_type="slow", activity_execution_id="exec-9",
                             message="start_to_close timeout", exception_type="TimeoutError")]
    (command,) = wire(Uncaught, history)
    assert command == {"type": "fail_workflow", "message": "start_to_close timeout", "exception_type": "TimeoutError",
                       "exception_class": "sync_worker.errors.ActivityFailed",
                       "exception": {"type": "TimeoutError", "class": "sync_worker.errors.ActivityFailed",
                                     "message": "start_to_close timeout", "activity_type": "slow"},
                       "failed_step_sequence": 1, "failed_activity_execution_id": "exec-9"}


def test_uncaught_exception_becomes_fail_workflow_untruncated() -> None:
    @workflow.defn(name="t.raises")
    class Raises:
        def run(self, ctx: Any) -> Any:
            yield ctx.side_effect(lambda: 1)
            raise KeyError("x" * 50_000)

    commands = wire(Raises, [started()])
    assert [c["type"] for c in commands] == ["record_side_effect", "fail_workflow"]
    assert commands[1]["exception_type"] == "KeyError" and commands[1]["exception_class"] == "builtins.KeyError"
    assert len(commands[1]["message"]) > 50_000


def test_workflow_cancelled_becomes_fail_workflow() -> None:
    @workflow.defn(name="t.cancel")
    class Cancel:
        def run(self, ctx: Any) -> Any:
            ctx.throw_if_cancellation_requested()
            yield ctx.start_timer(1)

    (command,) = wire(Cancel, [started()], cancel_requested=True)
    assert command["type"] == "fail_workflow" and command["exception_type"] == "WorkflowCancelled"
    assert issubclass(WorkflowCancelled, BaseException) and not issubclass(WorkflowCancelled, Exception)


@workflow.defn(name="t.parallel")
class Parallel:
    def run(self, ctx: Any) -> Any:
        values = yield [ctx.schedule_activity("a", []), [ctx.schedule_activity("b", []), ctx.start_timer(3)]]
        return values


def _member(kind: str, sequence: int, index: int, inner: Optional[int] = None, **extra: Any) -> Any:
    outer = {"parallel_group_id": "parallel-calls:1:3", "parallel_group_kind": "mixed",
             "parallel_group_base_sequence": 1, "parallel_group_size": 3, "parallel_group_index": index}
    path = [outer]
    if inner is not None:
        path.append({"parallel_group_id": "parallel-calls:2:2", "parallel_group_kind": "mixed",
                     "parallel_group_base_sequence": 2, "parallel_group_size": 2, "parallel_group_index": inner})
    return ev(kind, sequence=sequence, **path[-1], parallel_group_path=path, **extra)


def test_parallel_group_metadata_on_new_commands() -> None:
    commands = wire(Parallel, [started()])
    assert [c["parallel_group_path"] for c in commands][2] == [
        {"parallel_group_id": "parallel-calls:1:3", "parallel_group_kind": "mixed", "parallel_group_base_sequence": 1,
         "parallel_group_size": 3, "parallel_group_index": 2},
        {"parallel_group_id": "parallel-calls:2:2", "parallel_group_kind": "mixed", "parallel_group_base_sequence": 2,
         "parallel_group_size": 2, "parallel_group_index": 1}]
    assert commands[2]["parallel_group_id"] == "parallel-calls:2:2" and commands[0]["parallel_group_index"] == 0


def test_parallel_results_completed_out_of_order_come_back_in_yield_order() -> None:
    history = [started(),
               _member("ActivityScheduled", 1, 0, activity_type="a"),
               _member("ActivityScheduled", 2, 1, 0, activity_type="b"),
               _member("TimerScheduled", 3, 2, 1, delay_seconds=3),
               _member("TimerFired", 3, 2, 1),
               _member("ActivityCompleted", 2, 1, 0, activity_type="b", result=blob("B"), payload_codec="avro"),
               _member("ActivityCompleted", 1, 0, activity_type="a", result=blob("A"), payload_codec="avro")]
    assert result_of(wire(Parallel, history)) == ["A", ["B", None]]


def test_partly_resolved_group_re_emits_every_member() -> None:
    history = [started(), _member("ActivityScheduled", 1, 0, activity_type="a"),
               _member("ActivityScheduled", 2, 1, 0, activity_type="b"),
               _member("TimerScheduled", 3, 2, 1, delay_seconds=3),
               _member("ActivityCompleted", 1, 0, activity_type="a", result=blob("A"), payload_codec="avro")]
    commands = wire(Parallel, history)
    assert [(c["type"], c["parallel_group_base_sequence"] + c["parallel_group_index"]) for c in commands] == [
        ("schedule_activity", 1), ("schedule_activity", 2), ("start_timer", 3)]


def test_first_failing_member_is_thrown() -> None:
    history = [started(), _member("ActivityFailed", 2, 1, 0, activity_type="b", message="b broke"),
               _member("ActivityFailed", 1, 0, activity_type="a", message="a broke"),
               _member("TimerFired", 3, 2, 1)]
    (command,) = wire(Parallel, history)
    assert command["type"] == "fail_workflow" and command["message"] == "a broke"


def test_wait_condition_in_a_parallel_list_fails_the_workflow() -> None:
    @workflow.defn(name="t.badgroup")
    class BadGroup:
        def run(self, ctx: Any) -> Any:
            yield [ctx.wait_condition(lambda: True)]

    (command,) = wire(BadGroup, [started()])
    assert command["type"] == "fail_workflow" and command["exception_type"] == "TypeError"


@workflow.defn(name="t.signals")
class Signals:
    def __init__(self) -> None:
        self.seen: List[str] = []

    @workflow.signal("add")
    def add(self, item: str) -> None:
        self.seen.append(item)

    @workflow.update("reset")
    def reset(self, marker: str) -> int:
        self.seen = [marker]
        return len(self.seen)

    def run(self, ctx: Any) -> Any:
        initial = list(self.seen)
        first = yield ctx.schedule_activity("work", [list(self.seen)])
        ok = yield ctx.wait_condition(lambda: len(self.seen) >= 3, key="three", timeout=60)
        return {"initial": initial, "first": first, "ok": ok, "seen": self.seen}


def test_signal_recorded_before_the_first_result_applies_after_the_first_yield() -> None:
    history = [started(), ev("SignalReceived", signal_name="add", value=blob(["s1"]))]
    (command,) = wire(Signals, history)
    # run() saw no signal before its first yield (WorkflowStarted precedes the signal) ...
    assert payloads.decode_envelope(command["arguments"]) == [[]]
    # ... but the state at the yield includes it.
    result = replay(Signals, history, [])
    assert result.instance.seen == ["s1"]


def test_condition_wait_opens_then_reopens_then_is_satisfied() -> None:
    base = [started(), ev("SignalReceived", signal_name="add", value=blob(["s1"])),
            *activity_done(1, "work", "W"),
            ev("ConditionWaitOpened", sequence=2, condition_wait_id="w2", condition_key="three", timeout_seconds=60)]
    assert wire(Signals, base[:4]) == [{"type": "open_condition_wait", "condition_key": "three",
                                        "condition_definition_fingerprint": replay(Signals, base[:4], []).commands[0]
                                        .condition_definition_fingerprint, "timeout_seconds": 60}]
    # A signal that does not satisfy the predicate: the wait is re-opened.
    reopened = [*base, ev("SignalReceived", signal_name="add", value=blob(["s2"]))]
    assert [c["type"] for c in wire(Signals, reopened)] == ["open_condition_wait"]
    satisfied = [*reopened, ev("ConditionWaitOpened", sequence=3, condition_wait_id="w3", condition_key="three",
                               timeout_seconds=60),
                 ev("SignalReceived", signal_name="add", value=blob(["s3"]))]
    assert result_of(wire(Signals, satisfied)) == {"initial": [], "first": "W", "ok": True,
                                                   "seen": ["s1", "s2", "s3"]}


def test_condition_wait_timeout_resolves_false() -> None:
    history = [started(), *activity_done(1, "work", "W"),
               ev("ConditionWaitOpened", sequence=2, condition_wait_id="w2", condition_key="three", timeout_seconds=60),
               ev("TimerScheduled", sequence=3, timer_kind="condition_timeout", condition_wait_id="w2"),
               ev("TimerFired", sequence=3, timer_kind="condition_timeout", condition_wait_id="w2")]
    assert result_of(wire(Signals, history))["ok"] is False


def test_already_true_condition_records_nothing() -> None:
    history = [started(), ev("SignalReceived", signal_name="add", value=blob(["a"])),
               ev("SignalReceived", signal_name="add", value=blob(["b"])),
               ev("SignalReceived", signal_name="add", value=blob(["c"])), *activity_done(1, "work", "W")]
    assert result_of(wire(Signals, history))["ok"] is True


def test_changed_condition_key_is_non_deterministic() -> None:
    history = [started(), *activity_done(1, "work", "W"),
               ev("ConditionWaitOpened", sequence=2, condition_wait_id="w2", condition_key="renamed")]
    with pytest.raises(NonDeterministicReplayError, match="condition_key_changed"):
        replay(Signals, history, [])


def test_update_applied_replays_the_handler_in_history_order() -> None:
    history = [started(), *activity_done(1, "work", "W"),
               ev("ConditionWaitOpened", sequence=2, condition_wait_id="w2", condition_key="three"),
               ev("UpdateApplied", sequence=2, update_name="reset", arguments=blob(["r"])),
               ev("SignalReceived", signal_name="add", value=blob(["x"]))]
    # The update replaced the list, then one signal: two items, the wait is re-opened.
    assert [c["type"] for c in wire(Signals, history)] == ["open_condition_wait"]
    # The next signal arrived while that task was running, before the re-open was recorded:
    # it belongs to the re-opened wait, which it satisfies.
    history += [ev("SignalReceived", signal_name="add", value=blob(["y"])),
                ev("ConditionWaitOpened", sequence=3, condition_wait_id="w3", condition_key="three")]
    assert result_of(wire(Signals, history))["seen"] == ["r", "x", "y"]


@workflow.defn(name="t.two-approvals")
class TwoApprovals:
    def __init__(self) -> None:
        self.approved_by: List[str] = []

    @workflow.signal("approve")
    def approve(self, who: str) -> None:
        self.approved_by.append(who)

    def run(self, ctx: Any) -> Any:
        yield ctx.wait_condition(lambda: len(self.approved_by) >= 2, key="two-approvals")
        return self.approved_by


def test_signal_recorded_during_the_opening_task_and_one_during_the_re_opening_task() -> None:
    # Task 1 saw no signal and opened w1, but "ann" was committed first. Task 2 (woken by
    # "ann") re-opened the wait as w2 while "bob" arrived. "bob" therefore belongs to w2.
    history = [started(), ev("SignalReceived", signal_name="approve", value=blob(["ann"])),
               ev("ConditionWaitOpened", sequence=1, condition_wait_id="w1", condition_key="two-approvals"),
               ev("SignalReceived", signal_name="approve", value=blob(["bob"])),
               ev("SignalApplied", signal_name="approve"),
               ev("ConditionWaitOpened", sequence=2, condition_wait_id="w2", condition_key="two-approvals")]
    assert result_of(wire(TwoApprovals, history)) == ["ann", "bob"]
    # What task 2 itself saw (no "bob" yet, no w2): re-open.
    assert [c["type"] for c in wire(TwoApprovals, history[:3])] == ["open_condition_wait"]


def test_unknown_update_in_history_fails_the_workflow() -> None:
    history = [started(), ev("UpdateApplied", update_name="nope", arguments=blob([]))]
    (command,) = wire(Signals, history)
    assert command["type"] == "fail_workflow" and "unknown update 'nope'" in command["message"]


@workflow.defn(name="t.versions")
class Versions:
    def run(self, ctx: Any) -> Any:
        version = yield ctx.get_version("change", -1, 2)
        again = yield ctx.get_version("change", -1, 2)
        patched = yield ctx.patched("patch")
        yield ctx.deprecate_patch("old")
        label = "new" if version == 2 else "old"
        done = yield ctx.schedule_activity(label, [])
        return {"version": version, "again": again, "patched": patched, "done": done}


def _marker(sequence: int, change_id: str, version: int, low: int = -1, high: int = 2) -> Any:
    return ev("VersionMarkerRecorded", sequence=sequence, change_id=change_id, version=version,
              min_supported=low, max_supported=high)


def test_new_run_records_version_markers_then_schedules() -> None:
    commands = wire(Versions, [started()])
    assert [(c["type"], c.get("change_id"), c.get("version")) for c in commands] == [
        ("record_version_marker", "change", 2), ("record_version_marker", "patch", 1),
        ("record_version_marker", "old", 1), ("schedule_activity", None, None)]
    assert commands[-1]["activity_type"] == "new"


def test_recorded_markers_are_replayed() -> None:
    history = [started(), _marker(1, "change", 2), _marker(2, "patch", 1, high=1), _marker(3, "old", 1, high=1),
               *activity_done(4, "new", "N")]
    assert result_of(wire(Versions, history)) == {"version": 2, "again": 2, "patched": True, "done": "N"}


def test_history_without_markers_takes_the_old_path() -> None:
    history = [started(), *activity_done(1, "old", "O")]
    assert result_of(wire(Versions, history)) == {"version": -1, "again": -1, "patched": False, "done": "O"}


def test_recorded_version_outside_the_supported_range_is_non_deterministic() -> None:
    history = [started(), _marker(1, "change", 5, high=5)]
    with pytest.raises(NonDeterministicReplayError, match="outside the supported range"):
        replay(Versions, history, [])


def test_duplicate_legacy_markers_are_consumed() -> None:
    history = [started(), _marker(1, "change", 2), _marker(2, "change", 2), _marker(3, "patch", 1, high=1),
               _marker(4, "old", 1, high=1), *activity_done(5, "new", "N")]
    assert result_of(wire(Versions, history))["version"] == 2


@workflow.defn(name="t.can")
class ContinueAsNewWorkflow:
    def run(self, ctx: Any, n: int) -> Any:
        yield ctx.start_timer(1)
        if n % 2:
            yield ctx.continue_as_new(n + 1, task_queue="elsewhere")
        return ctx.continue_as_new(n + 1, workflow_type="t.can.v2")


@pytest.mark.parametrize(("n", "expected"), [(1, {"queue": "elsewhere"}), (2, {"workflow_type": "t.can.v2",
                                                                                "queue": "q"})])
def test_continue_as_new_yielded_or_returned(n: int, expected: Any) -> None:
    history = [started(), ev("TimerScheduled", sequence=1, delay_seconds=1), ev("TimerFired", sequence=1)]
    (command,) = wire(ContinueAsNewWorkflow, history, [n])
    assert command["type"] == "continue_as_new" and payloads.decode_envelope(command["arguments"]) == [n + 1]
    assert {key: command[key] for key in expected} == expected


@workflow.defn(name="t.saga")
class SagaWorkflow:
    def run(self, ctx: Any) -> Any:
        saga = ctx.saga()

        def forward(s: Any) -> Any:
            yield ctx.schedule_activity("reserve", [])
            s.add_compensation("unreserve", ["r"])
            yield ctx.schedule_activity("charge", [])
            s.add_compensation("refund", ["c"])
            yield ctx.schedule_activity("ship", [])
            return "shipped"

        return (yield from saga.run(forward))


def test_saga_compensates_in_reverse_order() -> None:
    history = [started(), *activity_done(1, "reserve", None), *activity_done(2, "charge", None),
               ev("ActivityScheduled", sequence=3, activity_type="ship"),
               ev("ActivityFailed", sequence=3, activity_type="ship", message="no truck")]
    assert [c["activity_type"] for c in wire(SagaWorkflow, history)] == ["refund"]
    history += activity_done(4, "refund", None)
    assert [c["activity_type"] for c in wire(SagaWorkflow, history)] == ["unreserve"]
    history += activity_done(5, "unreserve", None)
    (failed,) = wire(SagaWorkflow, history)
    assert failed["type"] == "fail_workflow" and failed["message"] == "no truck"


def test_failed_compensation_reports_both_failures() -> None:
    history = [started(), *activity_done(1, "reserve", None), *activity_done(2, "charge", None),
               ev("ActivityFailed", sequence=3, activity_type="ship", message="no truck"),
               ev("ActivityFailed", sequence=4, activity_type="refund", message="bank down")]
    (failed,) = wire(SagaWorkflow, history)
    assert failed["exception_type"] == "SagaCompensationFailed"
    assert failed["exception"]["initiating_failure"]["message"] == "no truck"
    assert failed["exception"]["compensation_failure"] == {
        "type": "ActivityFailed", "class": "sync_worker.errors.ActivityFailed", "message": "bank down",
        "activity_type": "refund", "registration_order": 2}


def test_side_effect_runs_once_and_replays_its_recorded_value() -> None:
    calls: List[int] = []

    @workflow.defn(name="t.effect")
    class Effect:
        def run(self, ctx: Any) -> Any:
            value = yield ctx.side_effect(lambda: calls.append(1) or len(calls))
            yield ctx.start_timer(1)
            return value

    commands = wire(Effect, [started()])
    assert [c["type"] for c in commands] == ["record_side_effect", "start_timer"] and calls == [1]
    history = [started(), ev("SideEffectRecorded", sequence=1, result=blob(41), payload_codec="avro"),
               ev("TimerScheduled", sequence=2, delay_seconds=1), ev("TimerFired", sequence=2)]
    assert result_of(wire(Effect, history)) == 41 and calls == [1]


def test_plain_run_completes_immediately_and_async_run_is_refused() -> None:
    @workflow.defn(name="t.plain")
    class Plain:
        def run(self, ctx: Any, a: int) -> Any:
            return a * 2

    assert result_of(wire(Plain, [started()], [21])) == 42
    with pytest.raises(InvalidWorkflowDefinition, match="async def"):
        @workflow.defn(name="t.async")
        class Async:
            async def run(self, ctx: Any) -> Any:
                return 1


def test_entry_arguments_mismatch() -> None:
    with pytest.raises(WorkflowEntryArgumentsMismatchError, match="workflow_entry_arguments_mismatch"):
        replay(Sequence, [started()], ["a", "b"])


def test_undecodable_and_json_tagged_payloads_are_refused() -> None:
    json_tagged = [started(), ev("ActivityCompleted", sequence=1, result={"codec": "json", "blob": '"x"'})]
    with pytest.raises(WorkflowPayloadDecodeError, match="unsupported_payload_codec"):
        replay(Sequence, json_tagged, ["x"])
    garbage = [started(), ev("SignalReceived", signal_name="add", value="not-avro", payload_codec="avro")]
    with pytest.raises(WorkflowPayloadDecodeError, match="signal 'add' payload decode failed"):
        replay(Signals, garbage, [])


def test_unsupported_history_features_are_refused() -> None:
    with pytest.raises(UnsupportedReplayHistory, match="ServiceCallStarted"):
        replay(Sequence, [started(), ev("ServiceCallStarted", sequence=1)], ["x"])


def test_duplicate_terminal_events_are_skipped() -> None:
    history = [started(), *activity_done(1, "first", "A"), activity_done(1, "first", "A")[1],
               *activity_done(2, "second", "B")]
    assert result_of(wire(Sequence, history, ["x"])) == ["A", "B"]


def test_logger_is_quiet_while_replaying(caplog: pytest.LogCaptureFixture) -> None:
    @workflow.defn(name="t.logs")
    class Logs:
        def run(self, ctx: Any) -> Any:
            ctx.logger.info("before %s", "first")
            yield ctx.start_timer(1)
            ctx.logger.info("after timer")
            yield ctx.start_timer(2)

    history = [started(), ev("TimerScheduled", sequence=1, delay_seconds=1), ev("TimerFired", sequence=1)]
    with caplog.at_level(logging.INFO, logger="sync_worker.workflow.user"):
        replay(Logs, history, [])
    assert [r.getMessage() for r in caplog.records if r.name == "sync_worker.workflow.user"] == ["after timer"]


def test_now_is_the_recorded_start_time() -> None:
    @workflow.defn(name="t.clock")
    class Clock:
        def run(self, ctx: Any) -> Any:
            return ctx.now().isoformat()

    assert result_of(wire(Clock, [started()])) == "2026-03-01T12:00:00+00:00"
    with pytest.raises(NonDeterministicReplayError, match="clock unavailable"):
        replay(Clock, [ev("WorkflowStarted")], [])
