"""The order workflow: charge, then ship; each step retried by the server on failure."""

from sync_worker import workflow

RETRY = {"max_attempts": 5, "backoff_seconds": [1, 2, 4, 8]}


@workflow.defn(name="orders.checkout")
class Checkout:
    def run(self, ctx, order_id):
        total = yield ctx.schedule_activity("orders.charge", [order_id], start_to_close_timeout=60,
                                            retry_policy=RETRY)
        receipt = yield ctx.schedule_activity("orders.ship", [order_id, total], start_to_close_timeout=60,
                                              retry_policy=RETRY)
        return {"order": order_id, "total_cents": total, "receipt": receipt}
