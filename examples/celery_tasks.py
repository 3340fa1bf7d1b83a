"""A Celery-era module on sync_worker_celery: run it to see .delay(), a retry, a chord and canvas
stamping end to end.

    python examples/celery_tasks.py

It starts the embedded dev server and a worker in this process; in production the worker is
``sync-worker celery -A examples.celery_tasks worker -l info`` and the server is the real one.
"""

from __future__ import annotations

from sync_worker_celery import Celery, chord
from sync_worker_celery.canvas import StampingVisitor
from sync_worker_celery.worker import WorkerGroup

from sync_worker.devserver import DevServer

app = Celery("shop")


@app.task
def price(item: str, quantity: int = 1) -> int:
    return {"apple": 3, "pear": 4}.get(item, 1) * quantity


@app.task(bind=True, max_retries=3)
def charge(self, total: int) -> str:
    if self.request.retries == 0:
        raise self.retry(countdown=1, exc=ConnectionError("payment gateway busy"))
    return f"charged {total} after {self.request.retries} retry"


@app.task
def total(prices: list) -> int:
    return sum(prices)


@app.task(bind=True)
def audited_total(self, prices: list) -> str:
    return f"{sum(prices)} (order {self.request.stamps['order_id']})"


class OrderStamp(StampingVisitor):
    """Stamps every task of a canvas with the order it belongs to (seen as ``self.request.stamps``)."""

    def __init__(self, order_id: str) -> None:
        self.order_id = order_id

    def on_signature(self, sig, **headers) -> dict:
        return {"order_id": self.order_id}


def main() -> None:
    with DevServer(port=0) as server:
        app.conf.durable_workflow_server_url = server.url
        workers = WorkerGroup(app, app.workers_for(["celery"]))
        workers.start()
        workers.wait_ready()
        try:
            print("price:", price.delay("pear", quantity=2).get(timeout=30))
            print("charge:", charge.delay(10).get(timeout=30))
            print("chord:", chord([price.s("apple"), price.s("pear", 3)])(total.s()).get(timeout=30))
            stamped = chord([price.s("apple"), price.s("pear")], audited_total.s())
            stamped.stamp(visitor=OrderStamp("A-17"))
            print("stamped chord:", stamped.apply_async().get(timeout=30))
        finally:
            workers.stop()
            workers.join(10)


if __name__ == "__main__":
    main()
