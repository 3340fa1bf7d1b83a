"""No-op activity throughput and worker CPU per task against a fast fake server, beside the published SDK.

    python3 bench/worker_throughput.py                   # 3 rounds x (sdk, threads, gevent), 3,000 tasks each
    python3 bench/worker_throughput.py --tasks 2000 --rounds 1 --slots 20
    python3 bench/worker_throughput.py --kinds sdk,threads,gevent --baseline /tmp/before   # A/B, interleaved

The server is ``bench/fake_worker_server.py`` (real dev-server response shapes, one selectors
thread, keep-alive), in its own process pinned to one core; each worker is one child process
pinned to the other core (``os.sched_setaffinity``), so "one worker process on one core" is
literal. A worker child measures its own user+system CPU from its first activity to its last;
the server records completion times and its own CPU. With ``--baseline DIR`` each of our kinds
is also run from another tree's ``sync_worker`` (``threads@base``: ``git archive main | tar -x
-C DIR``) in every round beside ours, so before and after share the same minutes; the per-round
ratios are printed.
``threads-requests`` is the thread worker with ``Client(worker_plane_transport="requests")``:
what the direct urllib3 path saves; ``-p4`` kinds run four activity pollers
(``max_concurrent_activity_task_polls=4``). Printed per kind and round: tasks/s (first
to last completion), worker CPU per task, the server's CPU share of that time (it must stay far
from a full core, or it would be the bottleneck), then medians, min/max and ratios to the SDK.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "_worker" and sys.argv[2].startswith("gevent"):
    from gevent import monkey  # patch first, as `sync-worker run -P gevent` does

    monkey.patch_all()

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from typing import Any, Dict, List, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

NOOP_TYPE = "bench.noop"
KINDS = ("sdk", "threads", "gevent", "threads-p4", "gevent-p4", "threads-requests")
WORKER_CORE, SERVER_CORE = 1, 0


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > core:
        os.sched_setaffinity(0, {core})


def parse_kind(kind: str) -> Tuple[str, str, int]:
    """``threads``, ``gevent-p4`` (4 activity pollers), ``threads-requests`` -> (pool, transport, pollers)."""
    pool, *rest = kind.split("-")
    via, polls = "stdlib", 1
    for part in rest:
        if part[:1] == "p" and part[1:].isdigit():
            polls = int(part[1:])
        else:
            via = part  # "requests": the worker plane through requests
    return pool, via, polls


def worker_child(kind: str, url: str, tasks: int, slots: int) -> None:
    _pin(WORKER_CORE)
    kind, _, base = kind.partition("@")
    tree = os.environ.get("SYNC_WORKER_BENCH_TREE")
    if base and tree:  # the baseline tree's sync_worker, imported before ours can be
        sys.path.insert(0, os.path.abspath(tree))
    state: Dict[str, Any] = {"count": 0, "cpu_start": None}
    lock = threading.Lock()
    finished = threading.Event()

    def on_task() -> None:
        with lock:
            if state["cpu_start"] is None:
                state["cpu_start"] = _cpu()
            state["count"] += 1
            if state["count"] >= tasks:
                finished.set()

    if kind == "sdk":
        import asyncio

        from durable_workflow import Client as SdkClient
        from durable_workflow import Worker as SdkWorker
        from durable_workflow import activity as sdk_activity

        @sdk_activity.defn(name=NOOP_TYPE)
        def sdk_noop() -> None:
            on_task()

        async def main() -> float:
            worker = SdkWorker(SdkClient(url), task_queue="bench", activities=[sdk_noop],
                               max_concurrent_activity_tasks=slots, poll_timeout=5.0)
            runner = asyncio.ensure_future(worker.run())
            while not finished.is_set() and not runner.done():
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)  # the last completions leave
            used = _cpu() - (state["cpu_start"] or _cpu())
            await worker.stop()
            try:
                await asyncio.wait_for(runner, 20)
            except BaseException:
                pass
            return used

        cpu_seconds = asyncio.run(main())
    else:
        from sync_worker import Client, Worker, activity

        @activity.defn(name=NOOP_TYPE)
        def noop() -> None:
            on_task()

        pool, via, polls = parse_kind(kind)
        client = Client(url, worker_plane_transport=via)
        worker = Worker(client, task_queue="bench", activities=[noop], pool=pool,
                        max_concurrent_activity_tasks=slots, max_concurrent_activity_task_polls=polls,
                        poll_timeout=5.0)
        runner = threading.Thread(target=worker.run, daemon=True)
        runner.start()
        finished.wait(600)
        time.sleep(0.1)
        cpu_seconds = _cpu() - (state["cpu_start"] or _cpu())
        worker.stop()
        runner.join(20)
    print("RESULT " + json.dumps({"kind": kind, "tasks": state["count"], "cpu_seconds": cpu_seconds}), flush=True)


def _one(kind: str, shapes_path: str, tasks: int, slots: int, baseline: str = "") -> Dict[str, Any]:
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_worker_server.py"), shapes_path, str(tasks)],
                              stdout=subprocess.PIPE, text=True, preexec_fn=lambda: _pin(SERVER_CORE))
    assert server.stdout is not None
    port = int(server.stdout.readline().split()[1])
    try:
        env = dict(os.environ, SYNC_WORKER_BENCH_TREE=baseline) if "@" in kind else None
        out = subprocess.run([sys.executable, __file__, "_worker", kind, f"http://127.0.0.1:{port}", str(tasks),
                              str(slots)], capture_output=True, text=True, timeout=900, env=env)
        lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
        if not lines:
            raise RuntimeError(f"{kind} worker gave no result:\n{out.stderr[-3000:]}")
        result = json.loads(lines[-1][7:])
    finally:
        server.send_signal(signal.SIGTERM)
        rest = server.communicate(timeout=30)[0]
    stats = json.loads([line for line in rest.splitlines() if line.startswith("STATS ")][-1][6:])
    wall = max(1e-9, stats["last_done"] - stats["first_done"])
    return {"kind": kind, "tasks_per_s": (stats["completed"] - 1) / wall,
            "cpu_ms_per_task": 1000.0 * result["cpu_seconds"] / max(1, result["tasks"]),
            "server_share": stats["cpu_seconds"] / wall, "completed": stats["completed"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slots", type=int, default=20)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--baseline", default="", help="another tree: each of our kinds also runs from its sync_worker")
    args = parser.parse_args()
    from _noise import NoiseProbe
    from fake_worker_server import capture_shapes

    noise = NoiseProbe(core=WORKER_CORE)

    kinds = [k for k in args.kinds.split(",") if k]
    if args.baseline:
        kinds = [v for k in kinds for v in ([k] if k == "sdk" else [k, k + "@base"])]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(capture_shapes(), handle)
        shapes_path = handle.name
    results: Dict[str, List[Dict[str, Any]]] = {kind: [] for kind in kinds}
    try:
        for round_no in range(args.rounds):
            order = kinds[round_no % len(kinds):] + kinds[:round_no % len(kinds)]
            for kind in order:
                noise.sample()
                one = _one(kind, shapes_path, args.tasks, args.slots, args.baseline)
                results[kind].append(one)
                print(f"round {round_no + 1} {kind:16s} {one['tasks_per_s']:8.0f} tasks/s  "
                      f"{one['cpu_ms_per_task']:.3f} ms CPU/task  server {100 * one['server_share']:.0f}% of a core",
                      flush=True)
    finally:
        os.unlink(shapes_path)

    def spread(kind: str, key: str) -> List[float]:
        return [r[key] for r in results[kind]]

    noise.sample()
    print(f"\n{args.tasks} no-op activities, {args.slots} slots; medians (min..max) over {args.rounds} round(s)")
    print(noise.report())
    sdk_rate = statistics.median(spread("sdk", "tasks_per_s")) if "sdk" in results else None
    sdk_cpu = statistics.median(spread("sdk", "cpu_ms_per_task")) if "sdk" in results else None
    for kind in kinds:
        rate, cpu, share = (spread(kind, key) for key in ("tasks_per_s", "cpu_ms_per_task", "server_share"))
        line = (f"  {kind:16s} {statistics.median(rate):7.0f} tasks/s ({min(rate):.0f}..{max(rate):.0f})  "
                f"{statistics.median(cpu):.3f} ms CPU/task ({min(cpu):.3f}..{max(cpu):.3f})  "
                f"server {100 * statistics.median(share):.0f}% of a core")
        if sdk_rate and sdk_cpu and kind != "sdk":
            ratio_rate, ratio_cpu = statistics.median(rate) / sdk_rate, statistics.median(cpu) / sdk_cpu
            line += f"   x{ratio_rate:.2f} throughput, x{ratio_cpu:.2f} CPU (SDK / ours: x{1 / ratio_cpu:.1f})"
        if kind + "@base" in results:
            base_cpu = spread(kind + "@base", "cpu_ms_per_task")
            pairs = [ours / base for ours, base in zip(cpu, base_cpu)]
            line += (f"   CPU ours / base x{statistics.median(cpu) / statistics.median(base_cpu):.2f} "
                     f"(per round {' '.join(f'x{p:.2f}' for p in pairs)})")
        print(line)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        worker_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
