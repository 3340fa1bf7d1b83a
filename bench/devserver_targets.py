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
  ``result(poll_interval=0.001)``, ``--result-poll`` to change it), one worker process; target <= 3 ms;
  with the server's own event times (``recorded_at``), to tell server time from worker time, and
  the CPU each process spends per workflow (worker, server, client: the client shares the
  worker's core).

``--baseline DIR`` (a directory holding another tree's ``sync_worker``, e.g. ``git archive <commit>
sync_worker | tar -x -C DIR``) measures every figure of ours on that tree too, in the same rounds
(its store fills its own file), and prints ours / baseline: the honest comparison on a shared machine.

Server CPU is the server process's CPU (``/proc``) over the timed window, not wall time, so it
is the figure to trust on a shared machine; rates and latencies move with the machine's load.
"""

from __future__ import annotations

import argparse
import json
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


def fill(db: str, **counts: int) -> None:
    """``devserver_throughput.fill`` in a child process: with ``--baseline`` the baseline tree's store
    writes the file (its own schema and indexes)."""
    subprocess.run([sys.executable, bench.__file__, "_fill", db, json.dumps(counts)], check=True)


def _tree(tree: str) -> None:
    """Run the next measurements' processes on ``tree`` (``""``: this one)."""
    if tree:
        os.environ["DEVSERVER_BENCH_TREE"] = tree
    else:
        os.environ.pop("DEVSERVER_BENCH_TREE", None)


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


def measure_starts(directory: str, count: int, clients: int = 2, stored: int = 0) -> float:
    """The server's ms CPU per workflow start (``stored`` runs already in the store)."""
    db = os.path.join(directory, "starts.sqlite")
    if stored:
        fill(db, stored=stored)
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
    fill(db, activities=queued)
    bench.WORKERS = workers
    try:
        return bench._measure(db, kind, "activities", queued)
    finally:
        _clean(db)


def measure_flows(directory: str, count: int) -> Dict[str, float]:
    db = os.path.join(directory, "flows.sqlite")
    fill(db, workflows=count)
    bench.WORKERS = 1
    try:
        return bench._measure(db, "threads-p4", "workflows", count, flows=True)
    finally:
        _clean(db)


def measure_latency(directory: str, count: int, transport: str = "requests", poll: float = 0.001,
                    kind: str = "threads-p4") -> List[float]:
    """Serial start -> result latencies (ms) with one worker process of ours; each process's CPU per
    workflow over the timed runs goes to :data:`LATENCY_CPU` (worker, server, the client).
    ``transport``: the client's ``control_plane_transport`` (the start and the result's reads). The
    client runs in a child process on the measured tree (``--baseline``: the baseline's client too);
    ``poll``: the ``poll_interval`` its ``result()`` gets (the SDK's default is 0.5 s)."""
    db = os.path.join(directory, "latency.sqlite")
    server, url = _server(db)
    worker = subprocess.Popen([sys.executable, bench.__file__, "_worker", kind, url, "1"],
                              preexec_fn=lambda: bench._pin(bench.WORKER_CORE))
    try:
        out = subprocess.run([sys.executable, __file__, "_latency", url, str(count), transport,
                              str(worker.pid), str(server.pid), str(poll)],
                             check=True, stdout=subprocess.PIPE, text=True)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        for name, value in got["cpu"].items():
            LATENCY_CPU.setdefault(name, []).append(value)
        for name, values in got["phases"].items():
            PHASES.setdefault(name, []).extend(values)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        _stop(server)
        _clean(db)
    return list(got["latencies"])


def latency_child(url: str, count: int, transport: str, worker_pid: int, server_pid: int, poll: float) -> None:
    """The client of :func:`measure_latency` (prints one JSON line)."""
    from sync_worker import Client

    bench._pin(bench.WORKER_CORE)
    latencies: List[float] = []
    phases: Dict[str, List[float]] = {}
    client = Client(url, control_plane_transport=transport)
    cpu: List[float] = []
    for n in range(count + 20):  # the first 20 warm the worker up
        if n == 20:
            cpu = [bench._proc_cpu(worker_pid), bench._proc_cpu(server_pid), time.process_time()]
        started = time.perf_counter()
        handle = client.start_workflow(bench.FLOW_TYPE, task_queue=bench.QUEUE, workflow_id=f"lat-{n}")
        handle.result(poll_interval=poll, timeout=30)
        if n >= 20:
            latencies.append(1000 * (time.perf_counter() - started))
            if handle.run_id:  # where the time goes, from the server's own event times
                events = list(client.iter_history(handle.workflow_id, handle.run_id))
                first = _when(events[0])
                for event in events:
                    phases.setdefault(str(event["event_type"]), []).append(1000 * (_when(event) - first))
    # (the history reads for the phases above run in the timed window too: client and server
    # CPU include them, the latencies do not)
    after = [bench._proc_cpu(worker_pid), bench._proc_cpu(server_pid), time.process_time()]
    print(json.dumps({"latencies": latencies, "phases": phases, "cpu": {
        name: 1000 * (last - first) / max(1, count)
        for name, first, last in zip(("worker", "server", "client"), cpu, after)}}))


#: process -> ms CPU per serial workflow (worker, server, client), over the latency runs
LATENCY_CPU: Dict[str, List[float]] = {}


#: event type -> ms after StartAccepted, over the latency runs (the server's ``recorded_at``)
PHASES: Dict[str, List[float]] = {}


def _when(event: Dict[str, object]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(str(event["recorded_at"]).replace("Z", "+00:00")).timestamp()


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
    parser.add_argument("--latency-worker", default="threads-p4",
                        help="the latency part's worker: threads-p4 (default) or gevent-p4, threads, gevent")
    parser.add_argument("--result-poll", type=float, default=0.001,
                        help="poll_interval of the latency part's result() (the SDK's default: 0.5)")
    parser.add_argument("--skip-sdk", action="store_true")
    parser.add_argument("--start-stored", type=int, default=20000,
                        help="also time starts with this many runs already stored (0: not)")
    parser.add_argument("--parts", default="act,start,drain,flows,latency", help="which figures to measure")
    parser.add_argument("--baseline", default="", help="a directory holding another tree's sync_worker package: "
                        "every figure of ours is measured on it too, in the same rounds, and printed as a ratio")
    args = parser.parse_args()
    from _noise import NoiseProbe

    noise = NoiseProbe(core=bench.SERVER_CORE)
    bench._pin(bench.WORKER_CORE)
    queued = [int(q) for q in args.queued.split(",") if q]
    parts = set(args.parts.split(","))
    trees = [("ours", "")] + ([("base", os.path.abspath(args.baseline))] if args.baseline else [])
    got: Dict[str, List[float]] = {}

    def note(key: str, value: float) -> None:
        got.setdefault(key, []).append(value)

    with tempfile.TemporaryDirectory(prefix="devserver-targets-") as directory:
        for round_no in range(args.rounds):
            noise.sample(3)
            for label, tree in trees:
                _tree(tree)
                r = f"round {round_no + 1} {label}:"
                for kind in ("raw", "threads-p4") if "act" in parts else ():
                    db = os.path.join(directory, "cpu.sqlite")
                    fill(db, activities=300 + args.measured)
                    bench.WORKERS = 4
                    one = bench._measure(db, kind, "activities", args.measured)
                    _clean(db)
                    note(f"{label} act {kind}", 1000 * one["server_share"] / max(1e-9, one["rate"]))
                    print(f"{r} server CPU per activity, 4 {kind} processes: "
                          f"{got[f'{label} act {kind}'][-1]:.3f} ms ({one['rate']:.0f}/s)", flush=True)
                for stored in ((0, args.start_stored) if args.start_stored else (0,)) if "start" in parts else ():
                    key = "start" if not stored else f"start {stored}"
                    note(f"{label} {key}", measure_starts(directory, args.starts, stored=stored))
                    print(f"{r} server CPU per start ({stored} runs stored): {got[f'{label} {key}'][-1]:.3f} ms",
                          flush=True)
                cases = [("threads-p4", q) for q in queued] if "drain" in parts else []
                if label == "ours" and not args.skip_sdk and "drain" in parts:
                    cases.append(("sdk", 3000))
                for kind, q in cases:
                    one = measure_drain(directory, kind, q)
                    note(f"{label} drain {kind} {q}", one["rate"])
                    note(f"{label} drain cpu {kind} {q}", 1000 * one["server_share"] / max(1e-9, one["rate"]))
                    print(f"{r} one {kind} worker process drains {q} queued: {one['rate']:.0f}/s, "
                          f"server {got[f'{label} drain cpu {kind} {q}'][-1]:.3f} ms CPU/activity", flush=True)
                if "flows" in parts:
                    one = measure_flows(directory, args.workflows)
                    note(f"{label} flows", one["rate"])
                    note(f"{label} flow cpu", 1000 * one["server_share"] / max(1e-9, one["rate"]))
                    print(f"{r} one-activity workflows: {one['rate']:.0f}/s, "
                          f"server {got[f'{label} flow cpu'][-1]:.3f} ms CPU/workflow", flush=True)
                if "latency" not in parts:
                    continue
                for transport in ("requests", "stdlib"):
                    lat = sorted(measure_latency(directory, args.latency, transport, args.result_poll,
                                                      args.latency_worker))
                    key = "" if transport == "requests" else " stdlib"
                    note(f"{label} p50{key}", lat[len(lat) // 2])
                    note(f"{label} p99{key}", lat[min(len(lat) - 1, int(len(lat) * 0.99))])
                    print(f"{r} serial start -> result, client control plane on {transport}: "
                          f"p50 {got[f'{label} p50{key}'][-1]:.2f} ms, p99 {got[f'{label} p99{key}'][-1]:.2f} ms; "
                          "recorded by the server, median ms after start: "
                          + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in PHASES.items())
                          + "; ms CPU per workflow: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in LATENCY_CPU.items()),
                          flush=True)
                    for name, values in LATENCY_CPU.items():
                        note(f"{label} latency cpu{key} {name}", values[-1])
                    PHASES.clear()
                    LATENCY_CPU.clear()
            _tree("")
            noise.sample(3)
    report(got, queued, args.rounds, noise.report(), args.baseline)


def report(got: Dict[str, List[float]], queued: List[int], rounds: int, noise: str, baseline: str) -> None:
    def med(key: str) -> float:
        return statistics.median(got[key])

    def base(key: str, spec: str = ".3f") -> str:
        if f"base {key}" not in got:
            return ""
        ratio = med(f"ours {key}") / med(f"base {key}")
        return f"  | baseline {_fmt(got[f'base {key}'], spec)}: ours x{ratio:.2f}"

    def verdict(ok: bool) -> str:
        return "met" if ok else "not met"

    print(f"\nIssue 29 dev server targets; median (min..max) over {rounds} round(s)"
          + (f"; baseline: every process (server, workers, client) on the sync_worker of {baseline}, "
             "same rounds" if baseline else ""))
    print(noise)
    for kind in ("raw", "threads-p4"):
        key = f"act {kind}"
        if "ours " + key in got:
            print(f"  server ms CPU per activity (poll + complete), 4 {kind:10s} processes: {_fmt(got['ours ' + key])}"
                  f"   [target <= 0.5: {verdict(med('ours ' + key) <= 0.5)}]{base(key)}")
    for key in sorted(k[5:] for k in got if k.startswith("ours start")):
        print(f"  server ms CPU per workflow start ({key[6:] or 0} runs stored): {_fmt(got['ours ' + key])}"
              f"   [target <= 0.35: {verdict(med('ours ' + key) <= 0.35)}]{base(key)}")
    rates = []
    for q in queued:
        key = f"drain threads-p4 {q}"
        if "ours " + key not in got:
            continue
        rates.append(med("ours " + key))
        line = (f"  one worker process of ours drains {q:6d} queued: {_fmt(got['ours ' + key], '.0f')} activities/s, "
                f"server {_fmt(got[f'ours drain cpu threads-p4 {q}'])} ms CPU/activity{base(key, '.0f')}")
        if f"ours drain sdk {q}" in got:
            ratio = med("ours " + key) / med(f"ours drain sdk {q}")
            line += f"; the SDK's worker {_fmt(got[f'ours drain sdk {q}'], '.0f')}/s: ours x{ratio:.2f}"
        print(line)
    if rates:
        print(f"  drain flatness slowest/fastest {min(rates) / max(rates):.2f}"
              f"   [target >= 1,500/s at every size: {verdict(min(rates) >= 1500)}]")
    if "ours flows" in got:
        print(f"  one-activity workflows/s, one worker process: {_fmt(got['ours flows'], '.0f')}, server "
              f"{_fmt(got['ours flow cpu'])} ms CPU/workflow   [target >= 500/s: {verdict(med('ours flows') >= 500)}]"
              f"{base('flows', '.0f')}")
    for key, what in (("", "requests"), (" stdlib", "stdlib (the default)")):
        if f"ours p50{key}" not in got:
            continue
        print(f"  serial start -> result latency, client control plane on {what}: p50 "
              f"{_fmt(got[f'ours p50{key}'], '.2f')} ms, p99 {_fmt(got[f'ours p99{key}'], '.2f')} ms"
              f"   [target <= 3 ms: {verdict(med(f'ours p50{key}') <= 3)}]{base(f'p50{key}', '.2f')}")
        print("    CPU per serial workflow (ms): " + ", ".join(
            f"{name} {_fmt(got[f'ours latency cpu{key} {name}'], '.2f')}" for name in ("worker", "server", "client")
            if f"ours latency cpu{key} {name}" in got))

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_start":
        start_child(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_latency":
        latency_child(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6]),
                      float(sys.argv[7]))
    else:
        main()
