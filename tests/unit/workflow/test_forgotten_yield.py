"""A forgotten ``yield``: a command where a value is expected, or a command built and dropped, fails
the workflow task with a message that says so (issue 27), and correct code is untouched by the check."""

from __future__ import annotations

from typing import Any

import pytest

from sync_worker import payloads, workflow
from sync_worker.errors import ActivityFailed, InvalidWorkflowDefinition
from sync_worker.workflow import execute_workflow_task, replay
from sync_worker.workflow.registry import WorkflowRegistry

from ._helpers import activity_done, ev, result_of, started, wire


@workflow.defn(name="fy.returns_command")
class ReturnsCommand:
    def run(self, ctx: Any) -> Any:
        yield ctx.start_timer(1)
        return ctx.schedule_activity("charge", [10])  # missing `yield`


@workflow.defn(name="fy.plain_function")
class PlainFunction:
    def run(self, ctx: Any, order: str) -> Any:
        ctx.schedule_activity("ship", [order])  # never runs: a plain function cannot yield
        return "done"


@workflow.defn(name="fy.dropped")
class Dropped:
    def run(self, ctx: Any) -> Any:
        ctx.start_timer(5)  # built, never yielded
        value = yield ctx.schedule_activity("fetch")
        return value


@workflow.defn(name="fy.nested")
class Nested:
    def run(self, ctx: Any) -> Any:
        value = yield ctx.schedule_activity("fetch")
        return {"items": [value, ctx.side_effect(lambda: 1)]}


@workflow.defn(name="fy.parallel")
class Parallel:
    def run(self, ctx: Any) -> Any:
        group = [ctx.schedule_activity("a"), [ctx.schedule_activity("b"), ctx.start_timer(1)]]
        results = yield group
        return results


@workflow.defn(name="fy.saga")
class SagaUnused:
    def run(self, ctx: Any) -> Any:
        saga = ctx.saga()

        def forward(s: Any) -> Any:
            booked = yield ctx.schedule_activity("book")
            s.add_compensation("unbook", [booked])
            return booked

        result = yield from saga.run(forward)
        return result


def test_a_returned_command_fails_the_task_and_names_the_call() -> None:
    history = [started(), ev("TimerScheduled", sequence=1, delay_seconds=1), ev("TimerFired", sequence=1)]
    with pytest.raises(InvalidWorkflowDefinition) as caught:
        replay(ReturnsCommand, history, [])
    message = str(caught.value)
    assert message.startswith("forgotten_yield: ReturnsCommand.run returned a ScheduleActivity")
    assert "did you forget `yield` before ctx.schedule_activity(...)" in message


def test_a_plain_function_that_builds_a_command_fails_instead_of_completing() -> None:
    with pytest.raises(InvalidWorkflowDefinition) as caught:
        replay(PlainFunction, [started()], ["o-1"])
    message = str(caught.value)
    assert "never yielded ctx.schedule_activity(...)" in message and "did you forget `yield`" in message


def test_a_dropped_command_fails_when_the_run_finishes() -> None:
    # While the run is still waiting nothing can be said (the timer could be yielded later) ...
    assert [c["type"] for c in wire(Dropped, [started()])] == ["schedule_activity"]
    # ... once it finishes, the timer was never scheduled.
    with pytest.raises(InvalidWorkflowDefinition, match=r"never yielded ctx\.start_timer\(\.\.\.\)"):
        replay(Dropped, [started(), *activity_done(1, "fetch", 7)], [])


def test_a_command_nested_in_the_result_is_found() -> None:
    with pytest.raises(InvalidWorkflowDefinition, match="returned a RecordSideEffect"):
        replay(Nested, [started(), *activity_done(1, "fetch", 7)], [])


def test_commands_yielded_in_nested_groups_count_as_yielded() -> None:
    history = [started(), *activity_done(1, "a", 1), *activity_done(2, "b", 2),
               ev("TimerScheduled", sequence=3, delay_seconds=1), ev("TimerFired", sequence=3)]
    assert result_of(wire(Parallel, history)) == [1, [2, None]]


def test_a_compensation_that_was_never_needed_is_not_a_forgotten_yield() -> None:
    assert result_of(wire(SagaUnused, [started(), *activity_done(1, "book", "B-1")])) == "B-1"


def test_the_worker_reports_it_as_a_workflow_task_failure_and_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    registry = WorkflowRegistry([PlainFunction])
    task = {"task_id": "t-1", "workflow_id": "w", "run_id": "r", "workflow_type": "fy.plain_function",
            "payload_codec": "avro", "arguments": payloads.envelope(["o-1"])}
    with caplog.at_level("WARNING"):
        outcome = execute_workflow_task(registry, task, [started()], task_queue="q")
    assert outcome.commands == []
    assert outcome.failure is not None and "did you forget `yield`" in outcome.failure["message"]
    assert any("did you forget `yield`" in record.getMessage() for record in caplog.records)


def test_a_workflow_failure_raised_after_a_dropped_command_still_fails_the_run() -> None:
    @workflow.defn(name="fy.raises")
    class Raises:
        def run(self, ctx: Any) -> Any:
            try:
                yield ctx.schedule_activity("x")
            except ActivityFailed:
                ctx.start_timer(1)
                raise
            return None

    # The dropped timer never reaches finish(): the run fails with the activity's error as before.
    history = [started(), ev("ActivityScheduled", sequence=1, activity_type="x"),
               ev("ActivityFailed", sequence=1, activity_type="x", exception_type="E", message="boom")]
    commands = wire(Raises, history)
    assert commands[-1]["type"] == "fail_workflow"
