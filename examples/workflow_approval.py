"""Signals, queries, updates and a timed condition wait: an expense approval workflow.

    python examples/workflow_approval.py                                   # embedded dev server
    python examples/workflow_approval.py --server-url http://127.0.0.1:8080

The workflow waits up to a day for a decision. ``approve``/``reject`` signals or the
``set_limit`` update change its state; the ``status`` query reads it at any time.
Only the import lines differ from the same workflow written for ``durable_workflow``.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional

from sync_worker import activity, workflow


@activity.defn(name="expenses.notify")
def notify(who: str, text: str) -> str:
    return f"notified {who}: {text}"


@activity.defn(name="expenses.pay")
def pay(amount: int) -> str:
    return f"paid {amount}"


@workflow.defn(name="expenses.approval")
class ExpenseApproval:
    def __init__(self) -> None:
        self.decision: Optional[str] = None
        self.approver: Optional[str] = None
        self.limit = 100
        self.history: List[str] = []

    @workflow.signal("approve")
    def approve(self, who: str) -> None:
        self.decision, self.approver = "approved", who
        self.history.append(f"approved by {who}")

    @workflow.signal("reject")
    def reject(self, who: str) -> None:
        self.decision, self.approver = "rejected", who
        self.history.append(f"rejected by {who}")

    @workflow.update("set_limit")
    def set_limit(self, limit: int) -> int:
        self.limit = limit
        self.history.append(f"limit set to {limit}")
        return self.limit

    @set_limit.validator
    def check_limit(self, limit: int) -> None:
        if limit < 0:
            raise ValueError("limit must not be negative")

    @workflow.query("status")
    def status(self) -> Dict[str, Any]:
        return {"decision": self.decision, "approver": self.approver, "limit": self.limit, "history": self.history}

    def run(self, ctx: Any, requester: str, amount: int) -> Any:
        ctx.logger.info("expense of %s from %s", amount, requester)  # silent while replaying
        yield ctx.schedule_activity("expenses.notify", ["manager", f"{requester} asks for {amount}"],
                                    start_to_close_timeout=30)
        if amount > self.limit:
            decided = yield ctx.wait_condition(lambda: self.decision is not None, key="decision", timeout=86_400)
            if not decided:
                return {"outcome": "expired", "amount": amount}
        else:
            self.decision = "auto-approved"
        # Added after the first release: runs started before it keep their old behaviour.
        if (yield ctx.patched("pay-approved-expenses")) and self.decision != "rejected":
            receipt = yield ctx.schedule_activity("expenses.pay", [amount],
                                                  retry_policy=workflow.ActivityRetryPolicy(max_attempts=5))
        else:
            receipt = None
        return {"outcome": self.decision, "approver": self.approver, "receipt": receipt}


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
        queue = f"expenses-{uuid.uuid4().hex[:8]}"
        worker = Worker(client, task_queue=queue, workflows=[ExpenseApproval], activities=[notify, pay],
                        poll_timeout=5.0)
        runner = threading.Thread(target=worker.run, name="expenses-worker", daemon=True)
        runner.start()
        try:
            handle = client.start_workflow("expenses.approval", "ada", 250, task_queue=queue)
            time.sleep(1.0)
            print("status:", handle.query("status")["result"])
            handle.signal("approve", ["grace"])
            print("result:", handle.result(timeout=30))
        finally:
            worker.stop()
            runner.join(10)
            client.close()


if __name__ == "__main__":
    main()
