"""The dev server's web UI with something to look at: runs in every state, then open the URL.

    python examples/devserver_ui.py                 # serves until Ctrl-C; open the printed /ui/ URL
    python examples/devserver_ui.py --token s3cret  # the UI asks for the token once
    python examples/devserver_ui.py --check         # start, fill, fetch each page once, exit

It starts an in-process dev server and a worker, then starts a completed order, an approval that
waits for a signal (send ``approve`` with ``["you"]`` from its page), a run stuck on a workflow
task failure (a value the codec cannot carry) and a standalone activity.
"""

from __future__ import annotations

import argparse
import threading
import time
import urllib.request
from typing import Any, List, Optional

from sync_worker import Client, Worker, activity, workflow
from sync_worker.devserver import DevServer

QUEUE = "ui-demo"


@activity.defn(name="demo.price")
def price(sku: str, quantity: int) -> dict:
    return {"sku": sku, "quantity": quantity, "cents": 1250 * quantity}


@workflow.defn(name="demo.order")
class Order:
    def run(self, ctx: Any, sku: str, quantity: int) -> Any:
        quote = yield ctx.schedule_activity("demo.price", [sku, quantity], start_to_close_timeout=30)
        return {"status": "placed", "quote": quote}


@workflow.defn(name="demo.approval")
class Approval:
    def __init__(self) -> None:
        self.approver: Optional[str] = None

    @workflow.signal("approve")
    def approve(self, who: str) -> None:
        self.approver = who

    def run(self, ctx: Any, what: str) -> Any:
        yield ctx.wait_condition(lambda: self.approver is not None, key="approval", timeout=86_400)
        return {"approved": what, "by": self.approver}


@workflow.defn(name="demo.stuck")
class Stuck:
    def run(self, ctx: Any) -> Any:
        return {"when": object()}  # not a payload value: the workflow task fails and is retried
        yield


def main(argv: Optional[List[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=None)
    parser.add_argument("--check", action="store_true", help="fetch each page once and exit")
    args = parser.parse_args(argv)
    with DevServer(port=args.port, db=":memory:", token=args.token) as server:
        client = Client(server.url, token=args.token)
        worker = Worker(client, task_queue=QUEUE, workflows=[Order, Approval, Stuck], activities=[price])
        runner = threading.Thread(target=worker.run, daemon=True)
        runner.start()
        client.start_workflow("demo.order", "SKU-1", 2, task_queue=QUEUE, workflow_id="order-1")
        client.start_workflow("demo.approval", "a new laptop", task_queue=QUEUE, workflow_id="approval-1")
        client.start_workflow("demo.stuck", task_queue=QUEUE, workflow_id="stuck-1")
        client.start_activity("demo.price", "SKU-2", 1, task_queue=QUEUE, activity_id="price-1")
        url = f"{server.url}/ui/"
        print(f"Dev server UI: {url}" + (f" (token: {args.token})" if args.token else ""), flush=True)
        try:
            if args.check:
                time.sleep(1.0)
                for page in ("workflows", "workflows/order-1", "workflows/approval-1", "activities", "workers",
                             "task-queues"):
                    with urllib.request.urlopen(f"{url}{page}", timeout=10) as response:
                        print(f"GET /ui/{page}: {response.status}", flush=True)
            else:
                while runner.is_alive():
                    runner.join(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            worker.stop()
            runner.join(10)
        return url


if __name__ == "__main__":
    main()
