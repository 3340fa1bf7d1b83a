"""The same workflow after a refactor that keeps its steps: it must still replay every history."""

from __future__ import annotations

from typing import Any, List

from sync_worker import workflow

DAY = 86_400


def _pay(ctx: Any, order: str) -> Any:
    return ctx.schedule_activity("orders.charge", [order], start_to_close_timeout=30)


@workflow.defn(name="orders.checkout")
class Checkout:
    """Reserve, wait, charge (moved lines, a helper, a docstring: no step changed)."""

    def run(self, ctx: Any, order: str, wait_days: int) -> Any:
        steps: List[Any] = []
        steps.append((yield ctx.schedule_activity("orders.reserve", [order], start_to_close_timeout=30)))
        yield ctx.sleep(wait_days * DAY)
        steps.append((yield _pay(ctx, order)))
        return steps
