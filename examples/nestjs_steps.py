"""Serve nestjs-durable steps from plain Python functions (docs/nestjs.md).

The TypeScript side (a NestJS app with @dudousxd/nestjs-durable-core and the BullMQ transport):

    engine.register('checkout', '1', async (ctx, order) => {
      const charge = await ctx.step('payments.charge-card', order, { retries: 3, backoff: 500 });
      return ctx.step('orders.receipt', { ...order, ...charge });
    });

This side, either from the command line:

    sync-worker nestjs examples.nestjs_steps:worker --transport redis://127.0.0.1:6379/0
    sync-worker nestjs examples.nestjs_steps:worker --transport postgresql://app@127.0.0.1/app -P gevent

or from Python: ``python examples/nestjs_steps.py redis://127.0.0.1:6379/0`` (Ctrl-C stops warm).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, Dict

from sync_worker.nestjs import FatalError, NestjsWorker, StepContext, StepWorker, transport_for_url

worker = StepWorker()


@worker.step("payments.charge-card")
def charge_card(order: Dict[str, Any]) -> Dict[str, Any]:
    """A blocking call to a payment gateway; the engine retries it unless the card is declined."""
    if order.get("card") == "4000000000000002":
        raise FatalError("card declined", code="card_declined", details={"orderId": order.get("orderId")})
    time.sleep(0.05)  # the gateway round trip
    return {"chargeId": f"ch_{order.get('orderId')}", "amountCents": order.get("amountCents")}


@worker.step("orders.receipt")
def receipt(order: Dict[str, Any], ctx: StepContext) -> Dict[str, Any]:
    """Uses the step context: ``step_id`` is stable across retries, a natural idempotency key."""
    ctx.log("rendering receipt", orderId=order.get("orderId"))
    for _page in range(3):
        ctx.raise_if_cancelled()
        ctx.heartbeat_sync()
    return {"receiptId": f"rc_{ctx.step_id}", "attempt": ctx.attempt}


def main(url: str) -> None:
    logging.basicConfig(level=logging.INFO)
    runner = NestjsWorker(worker, transport_for_url(url), concurrency=4)
    try:
        runner.run()
    except KeyboardInterrupt:
        runner.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/0")
