"""A long workflow run with the sticky workflow cache: each step costs the same, however long.

    python examples/sticky_long_run.py                  # 300 steps on an embedded dev server
    python examples/sticky_long_run.py --steps 1000 --no-cache
    python examples/sticky_long_run.py --shape gated    # each step waits for a signal first
    python examples/sticky_long_run.py --shape parallel # each step runs two activities at once
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
import threading
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


@workflow.defn(name="sticky.gated_sum")
class GatedSum:
    """Adds 1..steps; each step first waits until a "release" signal let it through."""

    def __init__(self) -> None:
        self.released = 0

    @workflow.signal("release")
    def release(self) -> None:
        self.released += 1

    def run(self, ctx: Any, steps: int) -> Any:
        total = 0
        for value in range(1, steps + 1):
            yield ctx.wait_condition(lambda value=value: self.released >= value, key=f"step-{value}")
            total = yield ctx.schedule_activity("sticky.add", [total, value])
        return total


@workflow.defn(name="sticky.parallel_sum")
class ParallelSum:
    """Adds 1..steps twice, two activities at once per step (a parallel group)."""

    def run(self, ctx: Any, steps: int) -> Any:
        total = 0
        for value in range(1, steps + 1):
            left, right = yield [ctx.schedule_activity("sticky.add", [0, value]),
                                 ctx.schedule_activity("sticky.add", [0, value])]
            total += left + right
        return total


SHAPES = {"steps": ("sticky.long_sum", lambda steps: steps * (steps + 1) // 2),
          "gated": ("sticky.gated_sum", lambda steps: steps * (steps + 1) // 2),
          "parallel": ("sticky.parallel_sum", lambda steps: steps * (steps + 1))}


def _release_each_wait(client: Client, workflow_id: str, run_id: str, steps: int, stop: threading.Event) -> None:
    """Send one "release" signal each time the run opens a condition wait (what a user would do)."""
    sent = 0
    while sent < steps and not stop.is_set():
        opened = sum(event.get("event_type") == "ConditionWaitOpened"
                     for event in client.iter_history(workflow_id, run_id))
        if opened > sent:
            client.signal_workflow(workflow_id, "release")
            sent += 1
        else:
            stop.wait(0.02)


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
    parser.add_argument("--shape", choices=sorted(SHAPES), default="steps")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    workflow_type, expected = SHAPES[args.shape]
    with server_url(args.server_url) as url:
        client = Client(url)
        worker = Worker(client, task_queue=QUEUE, workflows=[LongSum, GatedSum, ParallelSum], activities=[add],
                        poll_timeout=5, sticky_cache_capacity=0 if args.no_cache else 100)
        handle = client.start_workflow(workflow_type, args.steps, task_queue=QUEUE)
        stop = threading.Event()
        run_id = client.describe_workflow(handle.workflow_id).run_id or ""
        releaser = threading.Thread(target=_release_each_wait, daemon=True,
                                    args=(client.clone(), handle.workflow_id, run_id, args.steps, stop))
        if args.shape == "gated":
            releaser.start()
        began, cpu = time.monotonic(), time.process_time()
        try:
            worker.run_until(workflow_id=handle.workflow_id, timeout=600)
        finally:
            stop.set()
        result = handle.result(timeout=10)
        assert result == expected(args.steps), result
        summary = {"shape": args.shape, "result": result, "seconds": round(time.monotonic() - began, 2),
                   "process_cpu_seconds": round(time.process_time() - cpu, 2),
                   "sticky_cache": worker.sticky_cache_metrics()}
        print(summary)
        return summary


if __name__ == "__main__":
    main()
