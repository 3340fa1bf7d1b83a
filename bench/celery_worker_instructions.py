"""User-space instructions per no-op Celery-facade task in the worker (a count, not a time).

    python3 bench/celery_worker_instructions.py                     # threads and gevent, this tree
    python3 bench/celery_worker_instructions.py --tree /tmp/before  # the same for another tree
    python3 bench/celery_worker_instructions.py --kinds threads --small 300 --large 1300
    python3 bench/celery_worker_instructions.py --cpu --baseline /tmp/before   # CPU ms per task, interleaved
    python3 bench/celery_worker_instructions.py --facade --baseline /tmp/before  # the activity function alone

The facade's worker (``build_workers`` on ``bench/sync_celery_noop_app.py``, logging set up as
``sync-worker celery ... worker -l info`` does, to ``/dev/null``) runs against the fake server
(``bench/fake_worker_server.py``), which hands out ``bench.noop`` tasks shaped as ``noop.delay(t)``
publishes them (one float argument, no call metadata). The method is ``bench/worker_instructions.py``'s:
each kind runs twice under ``valgrind --tool=cachegrind --cache-sim=no``, for ``--small`` and
``--large`` tasks, and the difference over the extra tasks is the worker's instructions per task.
Kernel work is not in it (thread wake-ups are: ``--cpu`` measures the worker process's user + system
CPU time the same way, without valgrind, the trees interleaved). ``--facade`` times the facade's
activity function alone (``activity_for(noop)`` called in process with a real activity context: no
HTTP, no core runtime), CPU µs per call. Needs ``valgrind`` on PATH (only without ``--cpu``/``--facade``).
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and len(sys.argv) > 3 and sys.argv[1] in ("_worker", "_facade") and sys.argv[3] == "gevent":
    from gevent import monkey  # patch first, as `sync-worker celery ... worker -P gevent` does

    monkey.patch_all()

import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def worker_child(tree: str, kind: str, tasks: int, shapes_path: str) -> None:
    """Run the facade's worker (``kind`` pool, 20 slots, one poller) until ``tasks`` no-op tasks ran."""
    sys.path[:0] = [tree, os.path.join(tree, "integrations", "celery"), HERE]
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_worker_server.py"), shapes_path, str(tasks)],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline().split()[1])
    import logging

    import sync_celery_noop_app
    from sync_worker_celery.cli import CELERY_LOG_FORMAT
    from sync_worker_celery.worker import build_workers

    from sync_worker import Client
    from sync_worker.cli.params import configure_logging

    sink = open(os.devnull, "w")  # noqa: SIM115 - the log stream, for the life of this child
    configure_logging("info", format=CELERY_LOG_FORMAT, handlers=[logging.StreamHandler(sink)])
    done = threading.Event()
    count = [0]
    task: Any = sync_celery_noop_app.noop
    body = task.run

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        if count[0] >= tasks:
            done.set()
        return body(*args, **kwargs)

    task.run = counted
    app = sync_celery_noop_app.app
    [worker] = build_workers(app, ["bench"], concurrency=20, pool=kind, client=Client(f"http://127.0.0.1:{port}"),
                             max_concurrent_activity_task_polls=1, poll_timeout=5.0)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    done.wait(1800)
    time.sleep(0.2)
    worker.stop()
    runner.join(60)
    server.send_signal(signal.SIGTERM)
    server.communicate(timeout=60)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"CPU {usage.ru_utime + usage.ru_stime:.4f}", flush=True)


def facade_child(tree: str, kind: str, calls: int) -> None:
    """The facade's activity function alone: ``calls`` calls with a real activity context, in process."""
    sys.path[:0] = [tree, os.path.join(tree, "integrations", "celery"), HERE]
    import logging

    import sync_celery_noop_app
    from sync_worker_celery.cli import CELERY_LOG_FORMAT
    from sync_worker_celery.execution import activity_for

    from sync_worker import activity
    from sync_worker.cli.params import configure_logging

    sink = open(os.devnull, "w")  # noqa: SIM115 - the log stream, for the life of this child
    configure_logging("info", format=CELERY_LOG_FORMAT, handlers=[logging.StreamHandler(sink)])
    run_task = activity_for(sync_celery_noop_app.noop)

    def run(count: int) -> float:
        started = time.process_time()
        for number in range(count):
            info = activity.ActivityInfo(task_id=f"at-{number}", activity_type="bench.noop", activity_attempt_id="a-1",
                                         attempt_number=1, task_queue="bench", worker_id="bench-worker",
                                         task_metadata={"workflow_id": f"act-{number}"})
            activity.set_context(activity.ActivityContext(info=info, client=None))
            run_task(time.time())
        return time.process_time() - started

    def measure() -> None:
        run(500)  # warm-up
        print(f"US {min(run(calls) for _ in range(3)) / calls * 1e6:.2f}", flush=True)

    if kind == "gevent":
        import gevent

        gevent.spawn(measure).join()
    else:
        measure()


def facade_pairs(trees: List[str], kinds: List[str], calls: int, rounds: int) -> None:
    """CPU µs per call of the facade's activity function alone, the trees interleaved ``rounds`` times."""
    print(f"facade activity function alone: CPU us per call (best of 3 x {calls}), median of {rounds} rounds")
    for kind in kinds:
        figures: Dict[str, List[float]] = {tree: [] for tree in trees}
        for _ in range(rounds):
            for tree in trees:
                out = subprocess.run([sys.executable, __file__, "_facade", tree, kind, str(calls)],
                                     capture_output=True, text=True, timeout=3600)
                found = re.search(r"^US ([\d.]+)$", out.stdout, re.M)
                if found is None:
                    raise RuntimeError(f"no figure from the facade child:\n{out.stderr[-2000:]}")
                figures[tree].append(float(found.group(1)))
        for tree in trees:
            runs = ", ".join(f"{v:.1f}" for v in figures[tree])
            print(f"  {kind:8s} {statistics.median(figures[tree]):7.1f}  [{runs}]  {tree}", flush=True)


def _cpu_seconds(tree: str, kind: str, tasks: int, shapes_path: str) -> float:
    out = subprocess.run([sys.executable, __file__, "_worker", tree, kind, str(tasks), shapes_path],
                         capture_output=True, text=True, timeout=3600)
    found: Optional[re.Match[str]] = re.search(r"^CPU ([\d.]+)$", out.stdout, re.M)
    if found is None:
        raise RuntimeError(f"no CPU figure from the worker:\n{out.stderr[-2000:]}")
    return float(found.group(1))


def cpu_pairs(trees: List[str], kinds: List[str], small: int, large: int, rounds: int, shapes_path: str) -> None:
    """CPU ms (user + system, kernel work included) per task, the trees interleaved ``rounds`` times."""
    print(f"worker CPU ms per no-op facade task ({large} - {small} tasks), median of {rounds} interleaved rounds")
    for kind in kinds:
        figures: Dict[str, List[float]] = {tree: [] for tree in trees}
        for _ in range(rounds):
            for tree in trees:
                spent = _cpu_seconds(tree, kind, large, shapes_path) - _cpu_seconds(tree, kind, small, shapes_path)
                figures[tree].append(1000.0 * spent / (large - small))
        for tree in trees:
            runs = ", ".join(f"{v:.3f}" for v in figures[tree])
            print(f"  {kind:8s} {statistics.median(figures[tree]):7.3f}  [{runs}]  {tree}", flush=True)


def facade_shapes() -> Any:
    """The fake server's shapes, its activity task carrying ``noop.delay(t)``'s arguments."""
    from fake_worker_server import capture_shapes

    from sync_worker import payloads

    shapes = capture_shapes()
    shapes["activity_poll"]["task"]["arguments"] = payloads.envelope([time.time()])
    return shapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=REPO, help="the source tree whose sync_worker and facade are measured")
    parser.add_argument("--kinds", default="threads,gevent")
    parser.add_argument("--small", type=int, default=300)
    parser.add_argument("--large", type=int, default=1300)
    parser.add_argument("--cpu", action="store_true",
                        help="CPU time instead of instructions (no valgrind): this tree and --baseline, interleaved")
    parser.add_argument("--baseline", help="with --cpu: a second tree measured in turn with --tree")
    parser.add_argument("--rounds", type=int, default=5, help="with --cpu: interleaved rounds")
    parser.add_argument("--facade", action="store_true",
                        help="only the facade's activity function, in process (CPU us per call), vs --baseline")
    args = parser.parse_args()
    if args.facade:
        trees = [os.path.abspath(args.tree)] + ([os.path.abspath(args.baseline)] if args.baseline else [])
        facade_pairs(trees, [k for k in args.kinds.split(",") if k], 20000, args.rounds)
        return
    if args.cpu:
        sys.path.insert(0, REPO)
        sys.path.insert(0, HERE)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(facade_shapes(), handle)
        try:
            trees = [os.path.abspath(args.tree)] + ([os.path.abspath(args.baseline)] if args.baseline else [])
            cpu_pairs(trees, [k for k in args.kinds.split(",") if k], args.small, args.large, args.rounds, handle.name)
        finally:
            os.unlink(handle.name)
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    sys.path.insert(0, REPO)
    sys.path.insert(0, HERE)
    from worker_instructions import print_counts

    print_counts(__file__, args.tree, [k for k in args.kinds.split(",") if k], args.small, args.large,
                 facade_shapes(), "no-op facade task")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        worker_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) > 1 and sys.argv[1] == "_facade":
        facade_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
