"""Workflow code re-authored from the conformance fixtures' descriptions (shared by tests)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from sync_worker import workflow
from sync_worker.errors import ActivityFailed, ChildWorkflowFailed


@workflow.defn(name="golden.single-activity")
class GoldenSingleActivity:
    def run(self, ctx: Any, name: str) -> Any:
        greeting = yield ctx.schedule_activity("golden.greet", [name])
        return greeting


@workflow.defn(name="golden.signal-wait")
class GoldenSignalWait:
    def __init__(self) -> None:
        self.approved_by: Optional[str] = None

    @workflow.signal("approve")
    def approve(self, who: str) -> None:
        self.approved_by = who

    def run(self, ctx: Any) -> Any:
        yield ctx.wait_condition(lambda: self.approved_by is not None, key="approval", timeout=30)
        notified = yield ctx.schedule_activity("golden.notify", [self.approved_by])
        return {"approved_by": self.approved_by, "activity_result": notified}


@workflow.defn(name="golden.timeout-wait")
class GoldenTimeoutWait:
    def __init__(self) -> None:
        self.approved = False

    @workflow.signal("approve")
    def approve(self) -> None:
        self.approved = True

    def run(self, ctx: Any) -> Any:
        approved = yield ctx.wait_condition(lambda: self.approved, key="approval", timeout=5)
        return "approved" if approved else "timed-out"


@workflow.defn(name="golden.version-marker")
class GoldenVersionMarker:
    def run(self, ctx: Any) -> Any:
        version = yield ctx.get_version("golden-version", 1, 2)
        if version == 2:
            return (yield ctx.schedule_activity("golden.version-new-path", []))
        return (yield ctx.schedule_activity("golden.version-old-path", []))


@workflow.defn(name="golden.saga-compensation")
class GoldenSagaCompensation:
    def run(self, ctx: Any, order_id: str) -> Any:
        reservation = yield ctx.schedule_activity("golden.reserve-inventory", [order_id])
        try:
            yield ctx.start_child_workflow("golden.charge-payment", [order_id])
        except ChildWorkflowFailed as failure:
            yield ctx.schedule_activity("golden.release-inventory", [order_id, reservation, str(failure)])
            raise
        return reservation


@workflow.defn(name="tests.replay.parallel-metadata-producer")
class ParallelMetadataProducer:
    def run(self, ctx: Any) -> Any:
        results = yield [ctx.schedule_activity("parallel-activity", []),
                         ctx.start_child_workflow("parallel-child", []),
                         ctx.start_timer(1)]
        return results


@workflow.defn(name="tests.replay.parallel-result-binding")
class ParallelResultBinding:
    def run(self, ctx: Any) -> Any:
        results = yield [ctx.schedule_activity("position-first", []), ctx.schedule_activity("position-second", [])]
        return {"results": results}


@workflow.defn(name="tests.replay.update-signal-condition-timer")
class UpdateSignalConditionTimer:
    """Sleep, two activities (one failing), a wait that times out although an update and a
    signal arrive during it, another activity, then a wait satisfied by a signal."""

    def __init__(self) -> None:
        self.message: Optional[str] = None
        self.signal_marker: Optional[str] = None
        self.result: Optional[Dict[str, Any]] = None

    @workflow.update("set_message")
    def set_message(self, message: str) -> Dict[str, Any]:
        self.message = message
        return {"message": message}

    @workflow.signal("condition_ready")
    def condition_ready(self, marker: str) -> None:
        self.signal_marker = marker

    @workflow.signal("finish")
    def finish(self, result: Dict[str, Any]) -> None:
        self.result = result

    def run(self, ctx: Any) -> Any:
        yield ctx.sleep(1)
        successful = yield ctx.schedule_activity("successful", [])
        failure_type = None
        try:
            yield ctx.schedule_activity("non-retryable-failure", [])
        except ActivityFailed as failure:
            failure_type = failure.exception_type
        completed = yield ctx.wait_condition(lambda: self.result is not None, key="update-and-signal", timeout=1)
        after = yield ctx.schedule_activity("after-condition", [])
        yield ctx.wait_condition(lambda: self.result is not None, key="finish", timeout=30)
        return {"status": "completed", "successful": successful, "failure_type": failure_type,
                "message": self.message, "signal_marker": self.signal_marker, "condition_completed": completed,
                "after_condition": after, "result": self.result}


# PHP-side regression corpus, re-authored where the scenario is language-neutral.


@workflow.defn(name="Tests\\Fixtures\\V2\\TestMultipleTimerWorkflow")
class PhpMultipleTimers:
    def run(self, ctx: Any, slow: int, fast: int) -> Any:
        yield [ctx.start_timer(slow), ctx.start_timer(fast)]
        return {"timers_completed": True, "workflow_id": ctx.workflow_id, "run_id": ctx.run_id}


@workflow.defn(name="Tests\\Fixtures\\V2\\TestSequentialChildReplayWorkflow")
class PhpParallelChildren:
    def run(self, ctx: Any, *names: str) -> Any:
        children: List[Any] = yield [ctx.start_child_workflow("Tests\\Fixtures\\V2\\TestChildGreetingWorkflow", [n])
                                     for n in names]
        return {"children": children, "workflow_id": ctx.workflow_id, "run_id": ctx.run_id}


@workflow.defn(name="Tests\\Fixtures\\V2\\TestGoldenReplayWorkflow")
class PhpGoldenReplay:
    """The "single-activity" scenario: a version check that predates the marker, one greeting."""

    def run(self, ctx: Any, scenario: str) -> Any:
        version = yield ctx.get_version("golden-version", -1, 2)
        greeting = yield ctx.schedule_activity("Tests\\Fixtures\\V2\\TestGreetingActivity", ["Ada"])
        return {"stage": "completed", "name": None, "greeting": greeting, "approved": False, "version": version,
                "version_result": None, "reservation_id": None, "events": [f"activity:{greeting}"]}


ALL = [GoldenSingleActivity, GoldenSignalWait, GoldenTimeoutWait, GoldenVersionMarker, GoldenSagaCompensation,
       ParallelMetadataProducer, ParallelResultBinding, UpdateSignalConditionTimer, PhpMultipleTimers,
       PhpParallelChildren, PhpGoldenReplay]
