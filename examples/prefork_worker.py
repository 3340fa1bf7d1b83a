"""CPU-bound activities on a prefork pool: ``sync-worker run -P prefork -c 2``.

The worker (``make_worker`` below) has one CPU-bound activity, a report that crunches numbers
in pure Python, and a workflow that fans out to it. Run it with no arguments and this script
starts an embedded dev server, runs the worker on a prefork pool of two processes (as a real
``sync-worker run`` subprocess), starts a workflow and a few standalone reports, prints which
process ran each, and stops the pool with SIGTERM (a warm stop: every child drains)::

    python examples/prefork_worker.py
    python examples/prefork_worker.py --server-url http://127.0.0.1:7233     # your own server

The same module under your process manager (see docs/pools.md)::

    sync-worker run examples.prefork_worker:make_worker -Q reports -P prefork -c 4 --max-tasks-per-child 100
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional

from sync_worker import activity, workflow
from sync_worker.client import Client
from sync_worker.worker import Worker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@activity.defn(name="reports.crunch")
def crunch(rows: int) -> Dict[str, Any]:
    """A CPU-bound 'report': pure-Python arithmetic over ``rows`` rows (holds the GIL)."""
    total = 0
    for row in range(rows):
        total += (row * row) % 97
    return {"rows": rows, "checksum": total, "pid": os.getpid()}


@workflow.defn(name="reports.monthly")
class MonthlyReport:
    def run(self, ctx: Any, months: int) -> Any:
        parts = []
        for month in range(months):
            part = yield ctx.schedule_activity("reports.crunch", [200_000 + month])
            parts.append(part)
        return {"checksum": sum(p["checksum"] for p in parts), "pids": sorted({p["pid"] for p in parts}),
                "workflow_pid": os.getpid()}


def make_worker(client: Any, task_queue: str = "reports") -> Worker:
    return Worker(client, task_queue=task_queue, workflows=[MonthlyReport], activities=[crunch], poll_timeout=5.0)


@contextlib.contextmanager
def server_url(url: Optional[str]) -> Iterator[str]:
    if url:
        yield url
        return
    from sync_worker.devserver import DevServer

    with DevServer(port=0, db=":memory:") as server:
        print(f"started an embedded dev server at {server.url}")
        yield server.url


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--server-url", default=None, help="use this server instead of an embedded one")
    args = parser.parse_args(argv)
    with server_url(args.server_url) as url:
        queue = f"reports-{uuid.uuid4().hex[:8]}"
        env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL=url,
                   PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
        env.pop("SYNC_WORKER_POOL", None)
        pool = subprocess.Popen([sys.executable, "-m", "sync_worker", "run", "examples.prefork_worker:make_worker",
                                 "-Q", queue, "-P", "prefork", "-c", "2", "-l", "WARNING"], cwd=ROOT, env=env)
        client = Client(url)
        try:
            print(f"prefork pool started: parent pid {pool.pid}")
            handles = [client.start_activity("reports.crunch", 300_000, task_queue=queue) for _ in range(4)]
            pids = sorted({client.get_activity_result(h, timeout=60)["pid"] for h in handles})
            print(f"4 standalone reports ran in processes {pids}")
            run = client.start_workflow("reports.monthly", 3, task_queue=queue)
            result = run.result(timeout=60)
            print(f"workflow result: checksum {result['checksum']}, activities in {result['pids']}, "
                  f"workflow tasks in {result['workflow_pid']}")
        finally:
            started = time.monotonic()
            pool.send_signal(signal.SIGTERM)  # warm: every child drains, deregisters and exits
            code = pool.wait(60)
            print(f"prefork pool stopped in {time.monotonic() - started:.2f}s (exit {code})")
            client.close()


if __name__ == "__main__":
    main()
