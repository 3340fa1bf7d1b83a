"""A web app that also runs its durable workflows' activities, in the same processes.

``application`` is the WSGI app (with ``/healthz`` and ``/readyz``); ``build`` is the worker
factory the server hooks call in every web worker after the fork
(``SYNC_WORKER_FACTORY=shop:build``). See docs/embedding.md.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List

from sync_worker import Worker, activity, workflow
from sync_worker.embed import HealthMiddleware

TASK_QUEUE = os.environ.get("SHOP_TASK_QUEUE", "shop")


@activity.defn(name="shop.send_receipt")
def send_receipt(order_id: int) -> Dict[str, Any]:
    context = activity.context()
    for _ in range(3):  # plain blocking I/O; heartbeats keep the attempt's lease
        time.sleep(0.1)
        context.heartbeat_sync({"order_id": order_id})
    return {"order_id": order_id, "sent_by_pid": os.getpid()}


@workflow.defn(name="shop.checkout")
class Checkout:
    def run(self, ctx: Any, order_id: int) -> Any:
        receipt = yield ctx.schedule_activity("shop.send_receipt", [order_id], start_to_close_timeout=60,
                                              heartbeat_timeout=10)
        return receipt


def build(client: Any, concurrency: int) -> Worker:
    """The worker factory: ``client`` from DURABLE_WORKFLOW_SERVER_URL, ``concurrency`` small."""
    return Worker(client, task_queue=TASK_QUEUE, workflows=[Checkout], activities=[send_receipt],
                  max_concurrent_activity_tasks=concurrency)


def _pages(environ: Dict[str, Any], start_response: Any) -> List[bytes]:
    body = f"shop page served by {os.getpid()}\n".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


application = HealthMiddleware(_pages)
