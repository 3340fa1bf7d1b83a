"""The worker's CPU per workflow task in process: a dumped pair of tasks (cold, then sticky hit) replayed.

Takes the tasks ``bench/wft_turnaround.py --dump FILE`` received from the dev server (the
one-activity workflow: first task, then the one after the activity) and runs each pair through
``run_workflow_task`` with a worker plane that answers at once, the threads backend and a sticky
cache, so only the worker's own work from "task received" to "completion built" is timed.
Prints the median microseconds of process CPU per first and per second task over ``--rounds``.

    python3 bench/wft_turnaround.py --count 30 --dump /tmp/tasks.json
    python3 bench/wft_micro.py /tmp/tasks.json [--tree DIR] [--rounds 7] [--pairs 2000]
    python3 bench/wft_micro.py /tmp/tasks.json --instructions [--tree DIR] [--small 200] [--large 1200]

``--instructions`` counts user-space instructions per pair instead (a count the machine's load does
not move): the pairs run under ``valgrind --tool=cachegrind --cache-sim=no`` twice, ``--small`` and
``--large`` pairs, and the difference is divided by the extra pairs. That count covers each task's
whole worker-side path in process: the wire object copied (as a fresh decode would hand it over),
``parse_task``, ``run_workflow_task`` and the completion call (not its HTTP request).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks")
    parser.add_argument("--tree", default="")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--check", action="store_true", help="print the commands sent for the first pair")
    parser.add_argument("--instructions", action="store_true", help="count instructions per pair (valgrind)")
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--large", type=int, default=1200)
    parser.add_argument("--count-only", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.instructions:
        _count_instructions(args)
        return
    if args.tree:
        sys.path.insert(0, args.tree)
    from sync_worker import workflow
    from sync_worker.protocol import parse_task
    from sync_worker.runtime.backend import ThreadBackend
    from sync_worker.runtime.inflight import InflightTask
    from sync_worker.worker.sticky import StickyWorkflowCache
    from sync_worker.worker.workflow_tasks import run_workflow_task
    from sync_worker.workflow.registry import WorkflowRegistry

    with open(args.tasks) as handle:
        dumped: List[Dict[str, Any]] = json.load(handle)
    flow_type = dumped[0]["workflow_type"]

    @workflow.defn(name=flow_type)
    class OneActivity:
        def run(self, ctx: Any) -> Any:
            value = yield ctx.schedule_activity("bench.noop", [])
            return value

    pairs = []
    by_run: Dict[str, List[Dict[str, Any]]] = {}
    for raw in dumped:
        by_run.setdefault(raw["run_id"], []).append(raw)
    pairs = [tasks for tasks in by_run.values() if len(tasks) == 2]
    sent: List[Any] = []

    class Plane:
        def complete_workflow_task(self, task_id: str, **kwargs: Any) -> Dict[str, Any]:
            sent.append(kwargs)
            return {}

        def fail_workflow_task(self, task_id: str, **kwargs: Any) -> Dict[str, Any]:
            raise AssertionError(f"task failed: {kwargs.get('failure')}")

    registry, backend, plane = WorkflowRegistry([OneActivity]), ThreadBackend(), Plane()
    cache = StickyWorkflowCache(None)

    def one(raw: Dict[str, Any]) -> int:
        task = parse_task("workflow", json.loads(json.dumps(raw)))
        inflight = InflightTask(backend, "workflow", task.task_id)
        begin = time.thread_time_ns()
        outcome = run_workflow_task(client=plane, task=task, registry=registry, worker_id="w", task_queue="bench",
                                    inflight=inflight, sleep=time.sleep, sticky=cache, build_id=None,
                                    activities={})
        spent = time.thread_time_ns() - begin
        assert outcome == "completed", outcome
        return spent

    if args.count_only:
        for n in range(args.count_only):
            for raw in pairs[n % len(pairs)]:
                one(raw)
            sent.clear()
        return
    if args.check:
        for raw in pairs[0]:
            one(raw)
        for kwargs in sent:
            print(json.dumps({key: value for key, value in kwargs.items() if key != "cancel"}, sort_keys=True,
                             default=str))
        return
    firsts: List[float] = []
    seconds: List[float] = []
    for _ in range(args.rounds):
        a: List[int] = []
        b: List[int] = []
        for n in range(args.pairs):
            first, second = pairs[n % len(pairs)]
            a.append(one(first))
            b.append(one(second))
            sent.clear()
        firsts.append(statistics.median(a) / 1e3)
        seconds.append(statistics.median(b) / 1e3)
    print(f"first (cold) task: {statistics.median(firsts):.1f} us CPU ({min(firsts):.1f}..{max(firsts):.1f}); "
          f"second (sticky hit): {statistics.median(seconds):.1f} us ({min(seconds):.1f}..{max(seconds):.1f})")


def _count_instructions(args: argparse.Namespace) -> None:
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")

    def count(pairs: int) -> int:
        out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                              sys.executable, os.path.abspath(__file__), args.tasks, "--tree", args.tree,
                              "--count-only", str(pairs)], capture_output=True, text=True, timeout=3600)
        found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
        if found is None or out.returncode != 0:
            raise RuntimeError(f"no instruction count from valgrind:\n{out.stderr[-2000:]}")
        return int(found.group(1).replace(",", ""))

    small, large = count(args.small), count(args.large)
    print(f"tree {os.path.abspath(args.tree) if args.tree else 'this'}: user-space instructions per cold + "
          f"sticky-hit pair ({args.large} - {args.small} pairs): {(large - small) / (args.large - args.small):,.0f}")


if __name__ == "__main__":
    main()
