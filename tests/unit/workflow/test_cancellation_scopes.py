"""The cancellation surface of ``ctx`` as the SDK 2.12 exposes it (see ``sync_worker.workflow.scopes``)."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from sync_worker import payloads, workflow
from sync_worker.errors import LocalActivityExecutionAborted, WorkflowCancelled
from sync_worker.workflow import WorkflowContext, WorkflowRegistry, execute_workflow_task, replay
from sync_worker.workflow.scopes import AUTHORING_DISABLED, SCOPED_HISTORY
from tests.unit.workflow._helpers import activity_done, ev, started


def test_throw_respects_nested_shields_and_there_is_no_context() -> None:
    ctx = WorkflowContext(run_id="r", cancel_requested=True)
    assert ctx.is_cancellation_requested and ctx.cancellation_context is None
    with ctx.cancellation_shield():
        with ctx.cancellation_shield():
            ctx.throw_if_cancellation_requested()
        ctx.throw_if_cancellation_requested()
    with pytest.raises(WorkflowCancelled) as raised:
        ctx.throw_if_cancellation_requested()
    assert raised.value.request_id is None and raised.value.context is None
    WorkflowContext(run_id="r").throw_if_cancellation_requested()


@workflow.defn(name="unit.scopes.checker")
class Checker:
    def run(self, ctx: Any) -> Any:
        with ctx.cancellation_shield():
            done = yield ctx.schedule_activity("cleanup", [])
        ctx.throw_if_cancellation_requested()
        return done


@workflow.defn(name="unit.scopes.scoped")
class Scoped:
    def run(self, ctx: Any) -> Any:
        def body() -> Any:
            return (yield ctx.schedule_activity("cleanup", []))

        return (yield from ctx.cancellation_scope(body, shield_parent=True))


def test_an_unshielded_safe_point_fails_the_run_when_cancellation_was_requested() -> None:
    history = [started(), *activity_done(1, "cleanup", "ok")]
    assert replay(Checker, history, []).commands[-1].to_wire("q")["type"] == "complete_workflow"
    failed = replay(Checker, history, [], cancel_requested=True).commands[-1].to_wire("q")
    assert failed["type"] == "fail_workflow" and failed["message"] == "workflow cancellation was requested"


def test_a_scope_is_refused_when_it_starts_and_the_task_fails_with_the_reason() -> None:
    with pytest.raises(LocalActivityExecutionAborted, match=AUTHORING_DISABLED):
        replay(Scoped, [started()], [])
    ctx = WorkflowContext(run_id="r")
    ctx.cancellation_scope(lambda: None)  # nothing happens until it is started, as in the SDK
    task = {"task_id": "t", "workflow_type": "unit.scopes.scoped", "payload_codec": "avro",
            "arguments": payloads.envelope([]), "run_id": "r"}
    outcome = execute_workflow_task(WorkflowRegistry([Scoped]), task, [started()], task_queue="q")
    assert outcome.commands == [] and outcome.failure is not None
    assert AUTHORING_DISABLED in outcome.failure["message"]
    assert outcome.failure["type"] == "LocalActivityExecutionAborted"


@pytest.mark.parametrize("event", [
    ev("CancellationScopeOpened", sequence=1, scope_id="s1", parent_scope_id="root"),
    ev("ActivityScheduled", sequence=1, activity_type="cleanup", cancellation_scope_id="s1"),
    ev("TimerScheduled", sequence=1, delay_seconds=1, timer={"cancellation_scope_id": "s1"}),
])
def test_a_scoped_history_is_refused_before_any_code_runs(event: Dict[str, Any]) -> None:
    ran: List[int] = []

    @workflow.defn(name="unit.scopes.plain")
    class Plain:
        def run(self, ctx: Any) -> Any:
            ran.append(1)
            return (yield ctx.schedule_activity("cleanup", []))

    with pytest.raises(LocalActivityExecutionAborted, match=SCOPED_HISTORY):
        replay(Plain, [started(), event], [])
    assert ran == []
    replay(Plain, [started(), ev("ActivityScheduled", sequence=1, activity_type="cleanup",
                                 cancellation_scope_id="root")], [])
