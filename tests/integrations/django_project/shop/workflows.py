"""The order workflow: activities of both apps, each reading and writing rows."""

from sync_worker import workflow

RETRY = {"max_attempts": 5, "backoff_seconds": [1, 1, 1, 1]}


@workflow.defn(name="shop.fulfil_order")
class FulfilOrder:
    def run(self, ctx, order_id):
        order = yield ctx.schedule_activity("shop.load_order", [order_id], start_to_close_timeout=30,
                                            retry_policy=RETRY)
        reserved = yield ctx.schedule_activity("inventory.reserve", [order_id, order["sku"], order["quantity"]],
                                               start_to_close_timeout=30, retry_policy=RETRY)
        status = yield ctx.schedule_activity("shop.mark_status", [order_id, "fulfilled"], start_to_close_timeout=30,
                                             retry_policy=RETRY)
        return {"order": order_id, "status": status, "left": reserved["left"]}


@workflow.defn(name="shop.total_as_is")
class TotalAsIs:
    def run(self, ctx, order_id):
        total = yield ctx.schedule_activity("shop.order_total", [order_id], start_to_close_timeout=30,
                                            retry_policy=RETRY)
        return total


@workflow.defn(name="shop.slow_touch")
class SlowTouch:
    def run(self, ctx, order_id, seconds):
        result = yield ctx.schedule_activity("shop.slow_touch", [order_id, seconds], start_to_close_timeout=120,
                                             heartbeat_timeout=30)
        return result


@workflow.defn(name="shop.remind_unpaid")
class RemindUnpaid:
    """Three days after an order, mark it reminded (tested on a virtual clock)."""

    def run(self, ctx, order_id):
        yield ctx.sleep(3 * 86400)
        status = yield ctx.schedule_activity("shop.mark_status", [order_id, "reminded"], start_to_close_timeout=30,
                                             retry_policy=RETRY)
        return {"order": order_id, "status": status}
