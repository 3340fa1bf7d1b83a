"""The deliberately changed workflow: a fraud check now runs before the reservation.

Runs recorded by ``_replay_orders_v1`` no longer replay: their first step was the reservation.
"""

from __future__ import annotations

from typing import Any

from sync_worker import workflow


@workflow.defn(name="orders.checkout")
class Checkout:
    def run(self, ctx: Any, order: str, wait_days: int) -> Any:
        yield ctx.schedule_activity("orders.fraud_check", [order], start_to_close_timeout=30)  # CHANGED
        reserved = yield ctx.schedule_activity("orders.reserve", [order], start_to_close_timeout=30)
        yield ctx.sleep(wait_days * 86_400)
        charged = yield ctx.schedule_activity("orders.charge", [order], start_to_close_timeout=30)
        return [reserved, charged]
