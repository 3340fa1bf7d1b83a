"""Quickstart: a durable workflow with activities, run end to end on the embedded dev server.

    python examples/quickstart.py                      # starts a dev server in this process
    python examples/quickstart.py --server-url URL     # or use a running server

Everything here is plain blocking Python: no asyncio. The worker polls on threads; the
activities are ordinary functions; ``heartbeat_sync`` reports progress from inside one.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from typing import Any, Dict, Iterator, List, Optional

from sync_worker import Client, NonRetryableError, Worker, activity, workflow

QUEUE = "quickstart"


@activity.defn(name="quickstart.lookup_customer")
def lookup_customer(customer_id: int) -> Dict[str, Any]:
    if customer_id <= 0:
        raise NonRetryableError(f"no such customer: {customer_id}")
    return {"id": customer_id, "name": "Ada Lovelace", "email": "ada@example.com"}


@activity.defn(name="quickstart.render_invoice")
def render_invoice(customer: Dict[str, Any], lines: List[Dict[str, Any]]) -> Dict[str, Any]:
    total = 0
    for index, line in enumerate(lines):
        total += line["quantity"] * line["unit_cents"]
        activity.context().heartbeat_sync({"rendered": index + 1, "of": len(lines)})
    return {"to": customer["email"], "total_cents": total, "lines": len(lines)}


@activity.defn(name="quickstart.send_email")
def send_email(invoice: Dict[str, Any]) -> str:
    return f"sent invoice of {invoice['total_cents'] / 100:.2f} to {invoice['to']}"


@workflow.defn(name="quickstart.invoice")
class InvoiceWorkflow:
    """Look up a customer, render the invoice, then send it: three durable steps."""

    def __init__(self) -> None:
        self.stage = "starting"

    @workflow.query("stage")
    def current_stage(self) -> str:
        return self.stage

    def run(self, ctx: Any, customer_id: int, lines: List[Dict[str, Any]]) -> Any:
        self.stage = "lookup"
        customer = yield ctx.schedule_activity("quickstart.lookup_customer", [customer_id])
        self.stage = "render"
        invoice = yield ctx.schedule_activity(
            "quickstart.render_invoice", [customer, lines],
            retry_policy=workflow.ActivityRetryPolicy(max_attempts=3, initial_interval_seconds=1),
            start_to_close_timeout=60,
        )
        self.stage = "send"
        receipt = yield ctx.schedule_activity("quickstart.send_email", [invoice])
        self.stage = "done"
        return {"invoice": invoice, "receipt": receipt}


@contextlib.contextmanager
def server_url(given: Optional[str]) -> Iterator[str]:
    if given:
        yield given
        return
    from sync_worker.devserver import DevServer

    with DevServer(port=0, db=":memory:") as server:
        yield server.url


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--server-url", default=None)
    parser.add_argument("--token", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    with server_url(args.server_url) as url:
        client = Client(url, token=args.token)
        worker = Worker(client, task_queue=QUEUE, workflows=[InvoiceWorkflow],
                        activities=[lookup_customer, render_invoice, send_email], poll_timeout=5)
        lines = [{"sku": "tea", "quantity": 3, "unit_cents": 450}, {"sku": "scone", "quantity": 2, "unit_cents": 325}]
        handle = client.start_workflow("quickstart.invoice", 42, lines, task_queue=QUEUE)
        print(f"started workflow {handle.workflow_id} on {url}")
        worker.run_until(workflow_id=handle.workflow_id, timeout=60)
        result: Dict[str, Any] = handle.result(timeout=10)
        print("result:", result)
        events = [e["event_type"] for e in client.iter_history(handle.workflow_id, str(handle.run_id))]
        print("history:", " -> ".join(events))
        return result


if __name__ == "__main__":
    main()
