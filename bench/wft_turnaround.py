"""The worker's own time per workflow task on the serial chain: received -> completion sent.

Runs ``latency_trace.py``'s processes (dev server pinned to one core, the client on the other) but
the worker in this process, threads pool, pinned beside the client, with three marks per
workflow task: the dispatcher got the decoded poll answer (``dispatch``), the slot thread began
``run_workflow_task`` (``run``), and ``complete_workflow_task`` was called (``complete``, before
the body is encoded), plus the time until that call returned (``sent``: encoding, the request and
the server's answer), and the slot thread's CPU time from ``run`` to ``complete``.
Prints medians in microseconds for the first (cold) and second (sticky)
workflow task of each serial workflow.

    python3 bench/wft_turnaround.py [--count 300] [--tree DIR] [--profile FILE]

``--profile FILE`` writes a cProfile (thread CPU) of the slot threads' workflow task bodies.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CLIENT = r"""
import sys, time
sys.path[:0] = [p for p in sys.argv[3:] if p]
import devserver_throughput as bench
bench._pin(bench.WORKER_CORE)
from sync_worker import Client
client = Client(sys.argv[1])
for n in range(int(sys.argv[2])):
    client.start_workflow(bench.FLOW_TYPE, task_queue=bench.QUEUE, workflow_id=f"wt-{n}").result(
        poll_interval=0.001, timeout=30)
print("done", flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--tree", default="")
    parser.add_argument("--profile", default="")
    parser.add_argument("--yield-after-dispatch", action="store_true",
                        help="experiment: the poller thread yields (sleep(0)) after handing a workflow task over")
    parser.add_argument("--dump", default="", help="write the workflow tasks received (JSON list) to this file")
    args = parser.parse_args()
    if args.tree:
        os.environ["DEVSERVER_BENCH_TREE"] = args.tree
        sys.path.insert(0, args.tree)
    import devserver_throughput as bench
    from latency_trace import traced_server

    directory, _db, _out, server, url = traced_server("wft-turnaround")
    bench._pin(bench.WORKER_CORE)
    from typing import Any as _Any

    from sync_worker import Client, Worker, activity, workflow
    from sync_worker.worker import dispatch, workflow_tasks

    @activity.defn(name=bench.NOOP_TYPE)
    def noop() -> None:
        return None

    @workflow.defn(name=bench.FLOW_TYPE)
    class OneActivity:
        def run(self, ctx: _Any) -> _Any:
            value = yield ctx.schedule_activity(bench.NOOP_TYPE, [])
            return value

    per_run: Dict[str, List[Dict[str, int]]] = {}
    profiles: List[Any] = []
    dumped: List[Dict[str, Any]] = []
    original_workflow = dispatch.TaskDispatcher.workflow
    original_run = workflow_tasks.run_workflow_task

    def traced_workflow(self: Any, raw: Dict[str, Any], slot: Any, *rest: Any) -> Any:
        record = {"dispatch": time.perf_counter_ns()}
        per_run.setdefault(str(raw.get("workflow_run_id") or raw.get("run_id")), []).append(record)
        raw["__wft_record"] = record  # (removed again before the task runs)
        accepted = original_workflow(self, raw, slot, *rest)  # (rest: a relay poller's ``here``)
        if args.yield_after_dispatch:
            time.sleep(0)
        return accepted

    def traced_run(*, client: Any, task: Any, **kwargs: Any) -> str:
        record = task.raw.pop("__wft_record", None) if isinstance(task.raw, dict) else None
        if record is None:
            return original_run(client=client, task=task, **kwargs)
        if args.dump:
            import copy

            dumped.append(copy.deepcopy(task.raw))
        record["run"] = time.perf_counter_ns()
        record["run_cpu"] = time.thread_time_ns()
        complete = client.complete_workflow_task

        class Marked:
            def __getattr__(self, name: str) -> Any:
                return getattr(client, name)

            def complete_workflow_task(self, *a: Any, **k: Any) -> Any:
                record["complete"] = time.perf_counter_ns()
                record["complete_cpu"] = time.thread_time_ns()
                try:
                    return complete(*a, **k)
                finally:
                    record["sent"] = time.perf_counter_ns()

        if args.profile:
            import cProfile

            profile = cProfile.Profile(time.thread_time)
            profiles.append(profile)
            return profile.runcall(original_run, client=Marked(), task=task, **kwargs)
        return original_run(client=Marked(), task=task, **kwargs)

    dispatch.TaskDispatcher.workflow = traced_workflow  # type: ignore[method-assign]
    dispatch.run_workflow_task = traced_run  # type: ignore[assignment]
    worker = Worker(Client(url), task_queue=bench.QUEUE, activities=[noop], workflows=[OneActivity], pool="threads",
                    max_concurrent_activity_tasks=10, max_concurrent_activity_task_polls=4,
                    max_concurrent_workflow_task_polls=4, poll_timeout=5.0, shutdown_timeout=5.0)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    try:
        subprocess.run([sys.executable, "-c", CLIENT, url, str(args.count + 20), HERE, args.tree], check=True,
                       stdout=subprocess.DEVNULL)
    finally:
        worker.stop()
        runner.join(10)
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    os.rmdir(directory)
    runs = [records for records in per_run.values() if len(records) == 2 and all("sent" in r for r in records)][20:]
    print(f"{len(runs)} serial workflows, worker time per workflow task (median us)")
    print(f"{'task':<8} {'dispatch->run':>14} {'run->complete':>14} {'dispatch->complete':>19} "
          f"{'complete->answered':>19} {'run->complete CPU':>18}")
    for index, name in ((0, "first"), (1, "second")):
        rows = [records[index] for records in runs]

        def med(a: str, b: str, rows: List[Dict[str, int]] = rows) -> float:
            return statistics.median((r[b] - r[a]) / 1e3 for r in rows)

        print(f"{name:<8} {med('dispatch', 'run'):14.1f} {med('run', 'complete'):14.1f} "
              f"{med('dispatch', 'complete'):19.1f} {med('complete', 'sent'):19.1f} "
              f"{med('run_cpu', 'complete_cpu'):18.1f}")
    if args.dump:
        import json

        with open(args.dump, "w") as handle:
            json.dump(dumped, handle)
    if profiles:
        import pstats

        stats = pstats.Stats(profiles[0])
        for profile in profiles[1:]:
            stats.add(profile)
        stats.dump_stats(args.profile)


if __name__ == "__main__":
    main()
