"""Parallel activities, a child workflow and saga compensation: an order workflow.

    python examples/workflow_order_saga.py                                 # embedded dev server
    python examples/workflow_order_saga.py --server-url http://127.0.0.1:8080

Inventory for every line is reserved in parallel; payment runs as a child workflow; if any
step fails, the registered compensations run newest first and the workflow fails with the
original error (``SagaCompensationFailed`` if a compensation fails too).
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import uuid
from typing import Any, Dict, Iterator, List, Optional

from sync_worker import activity, workflow
from sync_worker.errors import NonRetryableError


@activity.defn(name="orders.reserve")
def reserve(sku: str, qty: int) -> str:
    return f"rsv-{sku}-{qty}"


@activity.defn(name="orders.release")
def release(reservation: str) -> str:
    return f"released {reservation}"


@activity.defn(name="orders.charge")
def charge(order_id: str, total: int) -> str:
    if total > 1000:
        raise NonRetryableError(f"card declined for {total}")
    return f"charge-{order_id}"


@workflow.defn(name="orders.payment")
class Payment:
    def run(self, ctx: Any, order_id: str, total: int) -> Any:
        return (yield ctx.schedule_activity("orders.charge", [order_id, total], start_to_close_timeout=30))


@workflow.defn(name="orders.order")
class Order:
    def run(self, ctx: Any, order_id: str, lines: List[Dict[str, Any]]) -> Any:
        saga = ctx.saga()

        def forward(saga: Any) -> Any:
            reservations = yield [ctx.schedule_activity("orders.reserve", [line["sku"], line["qty"]])
                                  for line in lines]
            for reservation in reservations:
                saga.add_compensation("orders.release", [reservation])
            total = sum(line["qty"] * line["price"] for line in lines)
            payment = yield ctx.start_child_workflow("orders.payment", [order_id, total],
                                                     parent_close_policy=workflow.ParentClosePolicy.TERMINATE)
            return {"order_id": order_id, "reservations": reservations, "payment": payment}

        return (yield from saga.run(forward))


@contextlib.contextmanager
def _server(url: Optional[str]) -> Iterator[str]:
    if url:
        yield url
        return
    from sync_worker.devserver import DevServer

    with DevServer(port=0, db=":memory:") as server:
        yield server.url


def main(argv: Optional[List[str]] = None) -> None:
    from sync_worker.client import Client
    from sync_worker.worker import Worker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default=None, help="use this server instead of an embedded one")
    args = parser.parse_args(argv)
    with _server(args.server_url) as url:
        client = Client(url)
        queue = f"orders-{uuid.uuid4().hex[:8]}"
        worker = Worker(client, task_queue=queue, workflows=[Order, Payment], activities=[reserve, release, charge],
                        poll_timeout=5.0)
        runner = threading.Thread(target=worker.run, name="orders-worker", daemon=True)
        runner.start()
        try:
            ok = client.start_workflow("orders.order", "o-1", [{"sku": "a", "qty": 2, "price": 10}],
                                       task_queue=queue)
            print("order:", ok.result(timeout=30))
            declined = client.start_workflow("orders.order", "o-2", [{"sku": "b", "qty": 1, "price": 5000},
                                                                     {"sku": "c", "qty": 1, "price": 1}],
                                             task_queue=queue)
            try:
                print("order:", declined.result(timeout=30))
            except Exception as error:  # the run failed after compensating
                print("order failed as expected:", error)
        finally:
            worker.stop()
            runner.join(10)
            client.close()


if __name__ == "__main__":
    main()
