"""Issue 29's dev server targets, each printed with the published SDK's worker beside ours.

    python3 bench/devserver_targets.py                 # every target, 2 rounds
    python3 bench/devserver_targets.py --rounds 1 --skip-sdk

The dev server (``DevServer``, SQLite file in WAL mode) runs in its own process pinned to core 0;
workers and clients run pinned to core 1 (the machine has two cores). Printed, each as a median
(min..max) over the rounds, with the machine's noise (``_noise.py``):

- server ms CPU per activity (poll + complete), driven by 4 ``raw`` clients (the cheapest client,
  see ``devserver_throughput.raw_worker``) and by 4 of our worker processes; target <= 0.5 ms;
- server ms CPU per workflow start (2 client processes, our ``Client.start_workflow`` on
  keep-alive sockets, nothing polling the queue); target <= 0.35 ms;
- end-to-end drain: ONE worker process (our ``Worker``, threads, 4 activity pollers, 10 slots)
  draining 300 / 3,000 / 10,000 queued no-op activities, and the published SDK's worker (one
  process, 10 slots) draining the same 3,000 queue: activities/s and the ratio; target >= 1,500/s
  flat from 300 to 10,000;
- one-activity workflows/s with one worker process of ours; target >= 500/s;
- serial start -> result latency p50 / p99 (one workflow at a time: ``start_workflow`` then
  ``result(poll_interval=0.001)``, each a describe request), one worker process; target <= 3 ms.

Server CPU is the server process's CPU (``/proc``) over the timed window, not wall time, so it
is the figure to trust on a shared machine; rates and latencies move with the machine's load.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import devserver_throughput as bench  # noqa: E402  (the bench's server, workers, fill and probes)

START_TYPE = "bench.started"


def _server(db: str) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen([sys.executable, bench.__file__, "_server", db], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline().split()[1])
    return server, f"http://127.0.0.1:{port}"


def _stop(server: subprocess.Popen[str]) -> None:
    server.send_signal(signal.SIGTERM)
    server.communicate(timeout=30)


def _clean(db: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)


def start_child(url: str, count: int) -> None:
    """Start ``count`` workflows one after the other (a client process)."""
    bench._pin(bench.WORKER_CORE)
    from sync_worker import Client

    client = Client(url)
    prefix = uuid.uuid4().hex[:8]
    for n in range(count):
        client.start_workflow(START_TYPE, task_queue="nobody", workflow_id=f"start-{prefix}-{n}")


def measure_starts(directory: str, count: int, clients: int = 2) -> float:
    """The server's ms CPU per workflow start."""
    db = os.path.join(directory, "starts.sqlite")
    server, url = _server(db)
    try:
        procs = [subprocess.Popen([sys.executable, __file__, "_start", url, str(count // clients)])
                 for _ in range(clients)]
        time.sleep(0.3)  # the clients import and connect; their first starts are not timed
        cpu0 = bench._proc_cpu(server.pid)
        done0 = _started(db)
        for proc in procs:
            if proc.wait(600) != 0:
                raise RuntimeError("a start client failed")
        cpu1, done1 = bench._proc_cpu(server.pid), _started(db)
    finally:
        _stop(server)
        _clean(db)
    return 1000 * (cpu1 - cpu0) / max(1, done1 - done0)


def _started(db: str) -> int:
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM runs WHERE workflow_id LIKE 'start-%'").fetchone()[0])
    finally:
        conn.close()


def measure_drain(directory: str, kind: str, queued: int, workers: int = 1) -> Dict[str, float]:
    db = os.path.join(directory, "drain.sqlite")
    bench.fill(db, activities=queued)
    bench.WORKERS = workers
    try:
        return bench._measure(db, kind, "activities", queued)
    finally:
        _clean(db)


def measure_flows(directory: str, count: int) -> Dict[str, float]:
    db = os.path.join(directory, "flows.sqlite")
    bench.fill(db, workflows=count)
    bench.WORKERS = 1
    try:
        return bench._measure(db, "threads-p4", "workflows", count, flows=True)
    finally:
        _clean(db)


def measure_latency(directory: str, count: int) -> List[float]:
    """Serial start -> result latencies (ms) with one worker process of ours."""
    from sync_worker import Client

    db = os.path.join(directory, "latency.sqlite")
    server, url = _server(db)
    worker = subprocess.Popen([sys.executable, bench.__file__, "_worker", "threads-p4", url, "1"],
                              preexec_fn=lambda: bench._pin(bench.WORKER_CORE))
    latencies: List[float] = []
    try:
        client = Client(url)
        for n in range(count + 20):  # the first 20 warm the worker up
            started = time.perf_counter()
            handle = client.start_workflow(bench.FLOW_TYPE, task_queue=bench.QUEUE, workflow_id=f"lat-{n}")
            handle.result(poll_interval=0.001, timeout=30)
            if n >= 20:
                latencies.append(1000 * (time.perf_counter() - started))
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        _stop(server)
        _clean(db)
    return latencies


def _fmt(values: List[float], spec: str = ".3f") -> str:
    return f"{format(statistics.median(values), spec)} ({format(min(values), spec)}..{format(max(values), spec)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--measured", type=int, default=3000, help="activities timed for the server-CPU figure")
    parser.add_argument("--starts", type=int, default=2000)
    parser.add_argument("--queued", default="300,3000,10000")
    parser.add_argument("--workflows", type=int, default=1000)
    parser.add_argument("--latency", type=int, default=300)
    parser.add_argument("--skip-sdk", action="store_true")
    args = parser.parse_args()
    from _noise import NoiseProbe

    noise = NoiseProbe(core=bench.SERVER_CORE)
    bench._pin(bench.WORKER_CORE)
    queued = [int(q) for q in args.queued.split(",") if q]
    per_act: Dict[str, List[float]] = {}
    per_start: List[float] = []
    drains: Dict[str, List[float]] = {}
    drain_cpu: Dict[str, List[float]] = {}
    flows: List[float] = []
    flow_cpu: List[float] = []
    lat50: List[float] = []
    lat99: List[float] = []
    with tempfile.TemporaryDirectory(prefix="devserver-targets-") as directory:
        for round_no in range(args.rounds):
            noise.sample(3)
            for kind in ("raw", "threads-p4"):
                db = os.path.join(directory, "cpu.sqlite")
                bench.fill(db, activities=300 + args.measured)
                bench.WORKERS = 4
                one = bench._measure(db, kind, "activities", args.measured)
                _clean(db)
                per_act.setdefault(kind, []).append(1000 * one["server_share"] / max(1e-9, one["rate"]))
                print(f"round {round_no + 1}: server CPU per activity, 4 {kind} processes: "
                      f"{per_act[kind][-1]:.3f} ms ({one['rate']:.0f}/s)", flush=True)
            per_start.append(measure_starts(directory, args.starts))
            print(f"round {round_no + 1}: server CPU per start: {per_start[-1]:.3f} ms", flush=True)
            cases = [("threads-p4", q) for q in queued] + ([] if args.skip_sdk else [("sdk", 3000)])
            for kind, q in cases:
                one = measure_drain(directory, kind, q)
                key = f"{kind} {q}"
                drains.setdefault(key, []).append(one["rate"])
                drain_cpu.setdefault(key, []).append(1000 * one["server_share"] / max(1e-9, one["rate"]))
                print(f"round {round_no + 1}: one {kind} worker process drains {q} queued: {one['rate']:.0f}/s, "
                      f"server {drain_cpu[key][-1]:.3f} ms CPU/activity", flush=True)
            one = measure_flows(directory, args.workflows)
            flows.append(one["rate"])
            flow_cpu.append(1000 * one["server_share"] / max(1e-9, one["rate"]))
            print(f"round {round_no + 1}: one-activity workflows: {flows[-1]:.0f}/s, "
                  f"server {flow_cpu[-1]:.3f} ms CPU/workflow", flush=True)
            lat = sorted(measure_latency(directory, args.latency))
            lat50.append(lat[len(lat) // 2])
            lat99.append(lat[min(len(lat) - 1, int(len(lat) * 0.99))])
            print(f"round {round_no + 1}: serial start -> result: p50 {lat50[-1]:.2f} ms, p99 {lat99[-1]:.2f} ms",
                  flush=True)
            noise.sample(3)
    print(f"\nIssue 29 dev server targets; median (min..max) over {args.rounds} round(s)")
    print(noise.report())
    for kind, values in per_act.items():
        ok = "met" if statistics.median(values) <= 0.5 else "not met"
        print(f"  server CPU per activity (poll + complete), 4 {kind:10s} processes: {_fmt(values)} ms   "
              f"[target <= 0.5: {ok}]")
    ok = "met" if statistics.median(per_start) <= 0.35 else "not met"
    print(f"  server CPU per workflow start: {_fmt(per_start)} ms   [target <= 0.35: {ok}]")
    ours = [statistics.median(drains[f"threads-p4 {q}"]) for q in queued]
    for q in queued:
        key = f"threads-p4 {q}"
        line = (f"  one worker process of ours drains {q:6d} queued: {_fmt(drains[key], '.0f')} activities/s, "
                f"server {_fmt(drain_cpu[key])} ms CPU/activity")
        sdk = drains.get(f"sdk {q}")
        if sdk:
            ratio = statistics.median(drains[key]) / statistics.median(sdk)
            line += f"; the SDK's worker {_fmt(sdk, '.0f')}/s: x{ratio:.2f}"
        print(line)
    ok = "met" if min(ours) >= 1500 else "not met"
    print(f"  drain flatness slowest/fastest {min(ours) / max(ours):.2f}   [target >= 1,500/s at every size: {ok}]")
    ok = "met" if statistics.median(flows) >= 500 else "not met"
    print(f"  one-activity workflows/s, one worker process: {_fmt(flows, '.0f')}, server {_fmt(flow_cpu)} ms "
          f"CPU/workflow   [target >= 500/s: {ok}]")
    ok = "met" if statistics.median(lat50) <= 3 else "not met"
    print(f"  serial start -> result latency: p50 {_fmt(lat50, '.2f')} ms, p99 {_fmt(lat99, '.2f')} ms   "
          f"[target <= 3 ms: {ok}]")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_start":
        start_child(sys.argv[2], int(sys.argv[3]))
    else:
        main()
