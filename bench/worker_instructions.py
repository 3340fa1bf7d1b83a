"""User-space instructions per no-op activity (a count, not a time), against the fake server.

    python3 bench/worker_instructions.py                          # threads and gevent, this tree
    python3 bench/worker_instructions.py --tree /tmp/before       # the same for another tree
    python3 bench/worker_instructions.py --kinds threads --small 300 --large 1300

Timings on a shared 2-core machine move by tens of percent between minutes; an instruction count
does not. Each kind runs twice under ``valgrind --tool=cachegrind --cache-sim=no`` (the worker
process only: the fake server, ``bench/fake_worker_server.py``, is a child valgrind does not
follow), once for ``--small`` tasks and once for ``--large``; the difference over the extra
tasks is the worker's instructions per task, start-up and shutdown cancelled out. Kernel work
(system calls, context switches) is not in it: ``bench/worker_throughput.py`` measures the CPU
time that includes it. Needs ``valgrind`` on PATH.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "_worker" and sys.argv[3] == "gevent":
    from gevent import monkey  # patch first, as `sync-worker run -P gevent` does

    monkey.patch_all()

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NOOP_TYPE = "bench.noop"


def worker_child(tree: str, kind: str, tasks: int, shapes_path: str) -> None:
    """Run one worker (``kind`` pool, 20 slots, one poller) until ``tasks`` no-op activities ran."""
    sys.path.insert(0, tree)
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_worker_server.py"), shapes_path, str(tasks)],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline().split()[1])
    from sync_worker import Client, Worker, activity

    done = threading.Event()
    count = [0]

    @activity.defn(name=NOOP_TYPE)
    def noop() -> None:
        count[0] += 1
        if count[0] >= tasks:
            done.set()

    worker = Worker(Client(f"http://127.0.0.1:{port}"), task_queue="bench", activities=[noop], pool=kind,
                    max_concurrent_activity_tasks=20, max_concurrent_activity_task_polls=1, poll_timeout=5.0)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    done.wait(1800)
    time.sleep(0.2)
    worker.stop()
    runner.join(60)
    server.send_signal(signal.SIGTERM)
    server.communicate(timeout=60)


def instructions(script: str, tree: str, kind: str, tasks: int, shapes_path: str) -> int:
    """User-space instructions of ``script _worker TREE KIND TASKS SHAPES`` under cachegrind."""
    out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                          sys.executable, script, "_worker", tree, kind, str(tasks), shapes_path],
                         capture_output=True, text=True, timeout=3600)
    found: Optional[re.Match[str]] = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{out.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def print_counts(script: str, tree: str, kinds: List[str], small: int, large: int, shapes: Any, what: str) -> None:
    """Count each kind at ``small`` and ``large`` tasks and print the difference per extra task."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(shapes, handle)
        shapes_path = handle.name
    try:
        print(f"tree {os.path.abspath(tree)}: user-space instructions per {what} ({large} - {small} tasks)")
        for kind in kinds:
            low = instructions(script, tree, kind, small, shapes_path)
            high = instructions(script, tree, kind, large, shapes_path)
            print(f"  {kind:8s} {(high - low) / (large - small):10,.0f}", flush=True)
    finally:
        os.unlink(shapes_path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=REPO, help="the source tree whose sync_worker is measured")
    parser.add_argument("--kinds", default="threads,gevent")
    parser.add_argument("--small", type=int, default=300)
    parser.add_argument("--large", type=int, default=1300)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    sys.path.insert(0, REPO)
    sys.path.insert(0, HERE)
    from fake_worker_server import capture_shapes

    print_counts(__file__, args.tree, [k for k in args.kinds.split(",") if k], args.small, args.large,
                 capture_shapes(), "no-op activity")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        worker_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        main()
