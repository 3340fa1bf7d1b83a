"""Where a serial start -> result goes: every server request of each serial one-activity workflow, timed.

The processes are those of ``devserver_targets.py``'s latency part (a dev server pinned to one core,
one worker process of ours, ``threads-p4``, and the client on the other core), with the server's
request handler wrapped to note, per request, when its head was read, when its answer was sent and
the handler thread's CPU time in between. Per workflow, each request in the chain is printed as
``label arrive..sent (cpu)`` in ms after the client called ``start_workflow``, as medians over the
timed workflows, plus the count of each kind of request per workflow.

Marks inside the requests (medians): when a request made work ready for a waiting poll
(``notify``), when that poll had the engine lock back (``woken``), around each COMMIT
(``committing``/``committed``) and when an answer began (``answering``); then per hop
"notifier -> woken poll": notify..woken, woken..answered, and the notifier's answer minus the
poll's (negative: the notifier answered first).

    python3 bench/latency_trace.py [--count 200] [--tree DIR] [--transport stdlib]

``LATENCY_TRACE_STATEMENTS=1``: also the SQL statements per workflow, by verb (the trace callback
costs the server CPU: read the handler CPU of a run without it).

``--tree DIR``: run every process on another tree's ``sync_worker`` (a baseline, as
``devserver_targets.py --baseline``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import devserver_throughput as bench  # noqa: E402


def server_child(db: str, out: str) -> None:
    bench._pin(bench.SERVER_CORE)
    from sync_worker.devserver import DevServer, app, engine, store

    log: List[Tuple[str, str, int, int, float, Dict[str, int]]] = []
    original = app._Handler._dispatch
    local = threading.local()

    def traced(self: Any, method: str) -> None:
        local.marks = marks = {}
        arrive, cpu = time.time_ns(), time.thread_time()
        original(self, method)
        log.append((method, self.path, arrive, time.time_ns(), time.thread_time() - cpu, marks))

    def mark(name: str) -> None:  # the first time a request reached a point (wake-ups)
        marks = getattr(local, "marks", None)
        if marks is not None and name not in marks:
            marks[name] = time.time_ns()

    # Marks: a completion made work ready (``notify``, under the engine lock, before its commit);
    # a waiting poll got the lock back after its wake-up (``woken``); this request committed a batch
    # (``committing`` .. ``committed``, around the COMMIT); it began its answer (``answering``, before encoding).
    produced, wait = engine.QueueWaiters.produced, engine.QueueWaiters.wait

    def traced_produced(self: Any) -> None:
        mark("notify")
        produced(self)

    def traced_wait(self: Any, timeout: float) -> None:
        wait(self, timeout)
        mark("woken")

    flush, send = store.Store.flush, app._Handler._send

    def traced_flush(self: Any) -> None:
        mark("committing")
        flush(self)
        mark("committed")

    def traced_send(self: Any, *args: Any, **kwargs: Any) -> None:
        mark("answering")
        send(self, *args, **kwargs)

    store.Store.flush = traced_flush  # type: ignore[method-assign]
    app._Handler._send = traced_send  # type: ignore[method-assign]
    engine.QueueWaiters.produced = traced_produced  # type: ignore[method-assign]
    engine.QueueWaiters.wait = traced_wait  # type: ignore[method-assign]
    app._Handler._dispatch = traced  # type: ignore[method-assign]
    profiles: List[Any] = []
    if os.environ.get("LATENCY_TRACE_PROFILE"):  # each handler thread's CPU profile, merged at the end
        import cProfile

        handle_one = app._Handler.handle

        def profiled(self: Any) -> None:
            profile = cProfile.Profile(time.thread_time)
            profiles.append(profile)
            profile.runcall(handle_one, self)

        app._Handler.handle = profiled  # type: ignore[method-assign]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    def statement(sql: str) -> None:  # counted per request, under "#VERB" (sqlite3's trace callback)
        marks = getattr(local, "marks", None)
        if marks is not None:
            verb = "#" + sql.lstrip().split(None, 1)[0].upper()
            marks[verb] = marks.get(verb, 0) + 1

    with DevServer(port=0, db=db) as server:
        if os.environ.get("LATENCY_TRACE_STATEMENTS"):
            server.engine.store._conn.set_trace_callback(statement)
        print(f"PORT {server.port}", flush=True)
        stop.wait()
    with open(out, "w") as handle:
        json.dump(log, handle)
    if profiles:
        import pstats

        stats = pstats.Stats(profiles[0])
        for profile in profiles[1:]:
            stats.add(profile)
        stats.dump_stats(os.environ["LATENCY_TRACE_PROFILE"])


def label(method: str, path: str) -> str:
    path = path.split("?", 1)[0]
    if path.startswith("/api/worker/"):
        parts = path.split("/")
        kind = "wft" if parts[3] == "workflow-tasks" else "act" if parts[3] == "activity-tasks" else parts[3]
        return f"{kind}.{parts[-1]}"
    if method == "POST" and path == "/api/workflows":
        return "start"
    if path.endswith("/history"):
        return "history"
    if method == "GET" and path.count("/") == 3:
        return "describe"
    return f"{method} {path}"


def traced_server(name: str) -> Tuple[str, str, str, subprocess.Popen[str], str]:
    """A dev server with its request handler traced, in its own process (also ``wft_turnaround.py``'s):
    ``(directory, db, trace file, process, url)``."""
    directory = f"/tmp/{name}-{os.getpid()}"
    os.makedirs(directory, exist_ok=True)
    db, out = os.path.join(directory, "trace.sqlite"), os.path.join(directory, "trace.json")
    server = subprocess.Popen([sys.executable, os.path.abspath(__file__), "_server", db, out],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    return directory, db, out, server, f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--tree", default="")
    parser.add_argument("--transport", default="stdlib")
    args = parser.parse_args()
    if args.tree:
        os.environ["DEVSERVER_BENCH_TREE"] = args.tree
        sys.path.insert(0, args.tree)
    directory, db, out, server, url = traced_server("latency-trace")
    worker = subprocess.Popen([sys.executable, bench.__file__, "_worker", "threads-p4", url, "1"],
                              preexec_fn=lambda: bench._pin(bench.WORKER_CORE))
    bench._pin(bench.WORKER_CORE)
    from sync_worker import Client

    client = Client(url, control_plane_transport=args.transport)
    windows: List[Tuple[int, int]] = []
    try:
        for n in range(args.count + 20):
            t0 = time.time_ns()
            handle = client.start_workflow(bench.FLOW_TYPE, task_queue=bench.QUEUE, workflow_id=f"lat-{n}")
            handle.result(poll_interval=0.001, timeout=30)
            if n >= 20:
                windows.append((t0, time.time_ns()))
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    with open(out) as handle:
        log = json.load(handle)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.unlink(db + suffix)
    os.unlink(out)
    os.rmdir(directory)
    steps: Dict[str, List[Tuple[float, float, float]]] = {}
    marked: Dict[str, List[float]] = {}
    hops: Dict[str, List[Tuple[float, float, float]]] = {}  # per woken poll (see the print)
    counts: Dict[str, int] = {}
    statements: Dict[str, int] = {}  # SQL verb -> statements in the timed workflows' requests
    latencies = sorted((end - start) / 1e6 for start, end in windows)
    for start, end in windows:
        seen: Dict[str, int] = {}
        for method, path, arrive, sent, cpu, marks in sorted(log, key=lambda entry: entry[3]):
            if not start <= sent <= end:
                continue
            name = label(method, path)
            seen[name] = seen.get(name, 0) + 1
            key = f"{name}#{seen[name]}"
            steps.setdefault(key, []).append(((max(arrive, start) - start) / 1e6, (sent - start) / 1e6, cpu * 1e3))
            for point, at in marks.items():
                if point.startswith("#"):  # a statement count (LATENCY_TRACE_STATEMENTS)
                    statements[point[1:]] = statements.get(point[1:], 0) + at
                    continue
                marked.setdefault(f"{key} {point}", []).append((max(at, start) - start) / 1e6)
        for name, many in seen.items():
            counts[name] = counts.get(name, 0) + many
        inside = [entry for entry in log if start <= entry[3] <= end]
        notes = sorted((entry[5]["notify"], entry[3], label(entry[0], entry[1])) for entry in inside
                       if "notify" in entry[5])
        for method, path, _arrive, sent, _cpu, marks in inside:
            woken = marks.get("woken")
            before = [note for note in notes if note[0] <= woken] if woken is not None else []
            if before:
                notify, notifier_sent, notifier = before[-1]
                hops.setdefault(f"{notifier} -> {label(method, path)}", []).append(
                    ((woken - notify) / 1e6, (sent - woken) / 1e6, (notifier_sent - sent) / 1e6))
    print(f"{len(windows)} serial workflows: p50 {latencies[len(latencies) // 2]:.2f} ms, "
          f"p90 {latencies[int(len(latencies) * 0.9)]:.2f} ms")
    print("requests answered per workflow: " + ", ".join(
        f"{name} {many / len(windows):.2f}" for name, many in sorted(counts.items())))
    print("step (how many workflows had it): median ms after start, arrived..answered (handler thread CPU ms)")
    for key, values in sorted(steps.items(), key=lambda item: statistics.median(v[1] for v in item[1])):
        print(f"  {key:<16} ({len(values):>4}) {statistics.median(v[0] for v in values):6.2f} .. "
              f"{statistics.median(v[1] for v in values):6.2f}  ({statistics.median(v[2] for v in values):.3f})")
    if statements:
        print("SQL statements per workflow (in its requests): " + ", ".join(
            f"{verb} {many / len(windows):.2f}" for verb, many in sorted(statements.items()))
            + f"; total {sum(statements.values()) / len(windows):.2f}")
    print("marks (notify: a request made work ready, under the engine lock; woken: a waiting poll has the "
          "lock back): median ms after start")
    for key, points in sorted(marked.items(), key=lambda item: statistics.median(item[1])):
        print(f"  {key:<24} ({len(points):>4}) {statistics.median(points):6.2f}")
    print("hops (notifier -> woken poll), medians in ms: notify..woken (the rest of the notifier's "
          "transaction + the switch), woken..answered (the poll's claim, commit, answer), "
          "notifier answered - poll answered")
    for key, values in sorted(hops.items()):
        print(f"  {key:<28} ({len(values):>4}) {statistics.median(v[0] for v in values):6.3f} "
              f"{statistics.median(v[1] for v in values):6.3f} {statistics.median(v[2] for v in values):+7.3f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_server":
        tree = os.environ.get("DEVSERVER_BENCH_TREE")
        if tree:
            sys.path.insert(0, tree)
        server_child(sys.argv[2], sys.argv[3])
    else:
        main()
