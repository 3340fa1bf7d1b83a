"""Durable selection: ask two quote services and take the first answer, with a deadline.

    python examples/workflow_select.py                                   # embedded dev server
    python examples/workflow_select.py --server-url http://127.0.0.1:8080

``ctx.select`` starts both quote activities and a timer in one task and resumes with whichever
finishes first (the server records its verdict as ``SelectionResolved``). The slower quote is
still awaited through its handle, to log it; the deadline timer is cancelled through its handle.
Only the import line differs from the same workflow written for ``durable_workflow``.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
import uuid
from typing import Any, Iterator, List, Optional

from sync_worker import activity, workflow


@activity.defn(name="quotes.ask")
def ask(provider: str, seconds: float, item: str) -> str:
    time.sleep(seconds)  # a slow remote call
    return f"{provider}: {item} for {len(item) * 3} EUR"


@workflow.defn(name="quotes.first")
class FirstQuote:
    def run(self, ctx: Any, item: str) -> Any:
        chosen = yield ctx.select({
            "acme": ctx.schedule_activity("quotes.ask", ["acme", 0.2, item], start_to_close_timeout=30),
            "globex": ctx.schedule_activity("quotes.ask", ["globex", 1.0, item], start_to_close_timeout=30),
            "deadline": ctx.start_timer(60),
        })
        if chosen.key == "deadline":
            return {"winner": None}
        yield chosen.handles["deadline"].cancel()
        other = "globex" if chosen.key == "acme" else "acme"
        late = yield chosen.handles[other]  # the loser kept running: its answer, for the record
        return {"winner": chosen.key, "quote": chosen.result(), "late": late}


@contextlib.contextmanager
def _server(url: Optional[str]) -> Iterator[str]:
    if url:
        yield url
        return
    from sync_worker.devserver import DevServer

    with DevServer(port=0, db=":memory:") as server:
        yield server.url


def main(argv: Optional[List[str]] = None) -> Any:
    from sync_worker.client import Client
    from sync_worker.worker import Worker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default=None, help="use this server instead of an embedded one")
    args = parser.parse_args(argv)
    with _server(args.server_url) as url:
        client = Client(url)
        queue = f"quotes-{uuid.uuid4().hex[:8]}"
        worker = Worker(client, task_queue=queue, workflows=[FirstQuote], activities=[ask], poll_timeout=5.0)
        runner = threading.Thread(target=worker.run, name="quotes-worker", daemon=True)
        runner.start()
        try:
            handle = client.start_workflow("quotes.first", "teapot", task_queue=queue)
            result = handle.result(timeout=30)
            print("result:", result)
            return result
        finally:
            worker.stop()
            runner.join(10)
            client.close()


if __name__ == "__main__":
    main()
