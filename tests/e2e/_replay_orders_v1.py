"""The order workflow as deployed when the histories of ``test_replay_cli.py`` were recorded."""

from __future__ import annotations

from typing import Any

from sync_worker import activity, workflow


@activity.defn(name="orders.reserve")
def reserve(order: str) -> str:
    return f"reserved {order}"


@activity.defn(name="orders.charge")
def charge(order: str) -> str:
    return f"charged {order}"


@workflow.defn(name="orders.checkout")
class Checkout:
    def run(self, ctx: Any, order: str, wait_days: int) -> Any:
        reserved = yield ctx.schedule_activity("orders.reserve", [order], start_to_close_timeout=30)
        yield ctx.sleep(wait_days * 86_400)
        charged = yield ctx.schedule_activity("orders.charge", [order], start_to_close_timeout=30)
        return [reserved, charged]
