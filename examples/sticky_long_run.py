"""A long workflow run with the sticky workflow cache: each step costs the same, however long.

    python examples/sticky_long_run.py                  # 300 steps on an embedded dev server
    python examples/sticky_long_run.py --steps 1000 --no-cache
    python examples/sticky_long_run.py --server-url URL

With ``sticky_cache_capacity`` the worker keeps the run's replayed state between its tasks and
the dev server sends only the new events (docs/worker.md, "Sticky workflow cache"); without
it every task replays the run from its first event. The worker's CPU and the cache's
counters are printed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import time
from typing import Any, Dict, Iterator, List, Optional

from sync_worker import Client, Worker, activity, workflow

QUEUE = "sticky-long-run"


@activity.defn(name="sticky.add")
def add(total: int, value: int) -> int:
    return total + value


@workflow.defn(name="sticky.long_sum")
class LongSum:
    """Adds 1..steps, one durable activity per step."""

    def run(self, ctx: Any, steps: int) -> Any:
        total = 0
        for value in range(1, steps + 1):
            total = yield ctx.schedule_activity("sticky.add", [total, value])
        return total


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
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--no-cache", action="store_true", help="replay every task cold")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with server_url(args.server_url) as url:
        client = Client(url)
        worker = Worker(client, task_queue=QUEUE, workflows=[LongSum], activities=[add], poll_timeout=5,
                        sticky_cache_capacity=0 if args.no_cache else 100)
        handle = client.start_workflow("sticky.long_sum", args.steps, task_queue=QUEUE)
        began, cpu = time.monotonic(), time.process_time()
        worker.run_until(workflow_id=handle.workflow_id, timeout=600)
        summary = {"result": handle.result(timeout=10), "seconds": round(time.monotonic() - began, 2),
                   "process_cpu_seconds": round(time.process_time() - cpu, 2),
                   "sticky_cache": worker.sticky_cache_metrics()}
        print(summary)
        return summary


if __name__ == "__main__":
    main()
