"""Workflows written against the PUBLISHED SDK, used unchanged by the import-swap test.

``tests/interop/test_import_swap.py`` loads this one source text twice: as it is (the published
``durable_workflow`` SDK) and with the import line below textually replaced by
``from sync_worker import activity, workflow``. Nothing else may differ, so keep this file free of
any sync_worker-only (or SDK-only) name. Activities are plain ``def`` (sync_worker refuses
``async def``; the published SDK accepts sync activities too). Type names are ``interop.swap.*``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from durable_workflow import activity, workflow  # the import-swap test rewrites this line

APPROVE_SIGNAL = "approve"
STAGE_QUERY = "stage"


@activity.defn(name="interop.swap.greet")
def greet(name: str) -> str:
    return f"hello {name}"


@activity.defn(name="interop.swap.double")
def double(value: int) -> int:
    return value * 2


@workflow.defn(name="interop.swap.child")
class Child:
    def run(self, ctx: Any, value: int) -> Any:
        doubled = yield ctx.schedule_activity("interop.swap.double", [value])
        return {"child_of": value, "doubled": doubled}


@workflow.defn(name="interop.swap.order")
class Order:
    """Activities, side_effect, get_version, a timer, a signal + wait_condition, a query, a parallel
    list of activities and a child workflow, in one run."""

    def __init__(self) -> None:
        self.stage = "started"
        self.approved_by: Optional[str] = None

    @workflow.signal(APPROVE_SIGNAL)
    def approve(self, who: str) -> None:
        self.approved_by = who

    @workflow.query(STAGE_QUERY)
    def current_stage(self) -> Dict[str, Any]:
        return {"stage": self.stage, "approved_by": self.approved_by}

    def run(self, ctx: Any, name: str, amount: int) -> Any:
        # deterministic on purpose: both variants must return the same value
        marker = yield ctx.side_effect(lambda: f"marker-{amount}")
        version = yield ctx.get_version("interop-order-greeting", -1, 2)
        greeting = yield ctx.schedule_activity("interop.swap.greet", [name])
        self.stage = "sleeping"
        yield ctx.start_timer(1)
        self.stage = "awaiting-approval"
        approved = yield ctx.wait_condition(lambda: self.approved_by is not None, key="approval", timeout=120)
        self.stage = "fan-out"
        doubles: List[int] = yield [ctx.schedule_activity("interop.swap.double", [n]) for n in (1, 2, amount)]
        child = yield ctx.start_child_workflow("interop.swap.child", [amount])
        self.stage = "done"
        return {"greeting": greeting, "marker": marker, "version": version, "approved": approved,
                "approved_by": self.approved_by, "doubles": doubles, "child": child}


@workflow.defn(name="interop.swap.countdown")
class Countdown:
    """Continue-as-new chain: each run doubles ``remaining`` once, then hands over to the next run."""

    def run(self, ctx: Any, remaining: int, collected: List[int]) -> Any:
        doubled = yield ctx.schedule_activity("interop.swap.double", [remaining])
        collected = [*collected, doubled]
        if remaining > 1:
            return ctx.continue_as_new(remaining - 1, collected)
        return {"collected": collected, "big": 9007199254740993}


WORKFLOWS = [Order, Child, Countdown]
ACTIVITIES = [greet, double]
