"""One side of ``bench/celery_delay.py``: N ``.delay()`` calls, then every result; prints JSON.

Runs under the Python of the system measured (real Celery's venv, or ours), stdlib only besides
the app module named by ``--app``. Latency of a task = the time its body ran (``time.time()`` it
returns) minus the time ``.delay()`` was called for it; throughput = N / (first ``.delay()`` →
last result read back); publish CPU = this process's CPU time (user + system) over the N
``.delay()`` calls, per call.
"""

import argparse
import importlib
import json
import statistics
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--app", required=True)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--publish-only", action="store_true", help="publish, read no result (no worker runs)")
    args = parser.parse_args()
    noop = importlib.import_module(args.app).noop
    for result in [noop.delay(time.time()) for _ in range(args.warmup)]:
        result.get(timeout=120)
    started = time.time()
    cpu_started = time.process_time()
    sent = []
    for _ in range(args.tasks):
        now = time.time()
        sent.append((now, noop.delay(now)))
    published = time.time()
    publish_cpu = time.process_time() - cpu_started
    if args.publish_only:
        json.dump({"tasks": args.tasks, "publish_s": published - started,
                   "publish_cpu_ms": 1000.0 * publish_cpu / args.tasks}, sys.stdout)
        return
    latencies = []
    for at, result in sent:
        latencies.append(result.get(timeout=300) - at)
    finished = time.time()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, round(0.99 * len(latencies)) - 1)]
    json.dump({"tasks": args.tasks, "wall_s": finished - started, "publish_s": published - started,
               "throughput": args.tasks / (finished - started),
               "publish_cpu_ms": 1000.0 * publish_cpu / args.tasks, "p50_ms": statistics.median(latencies) * 1000,
               "p99_ms": p99 * 1000}, sys.stdout)


if __name__ == "__main__":
    main()
