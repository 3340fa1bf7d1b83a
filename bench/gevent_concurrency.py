"""gevent vs threads: 1,000 concurrent I/O-bound activities, and per-task worker CPU.

Run from the repository root (one process tree; nothing is left running afterwards)::

    python3 bench/gevent_concurrency.py              # both parts, both pools
    python3 bench/gevent_concurrency.py --part io --activities 1000
    python3 bench/gevent_concurrency.py --part cpu --tasks 2000 --sdk

Processes: this driver (unpatched), the embedded dev server (``sync-worker devserver``, its own
child so its CPU is not counted in the worker), a slow HTTP endpoint (a gevent WSGI server that
holds every request ``--http-seconds``), and one worker child per measurement. A gevent worker
child is monkey-patched on its first lines, as ``sync-worker run -P gevent`` does.

(a) ``--part io``: N standalone activities are enqueued first, then ONE worker process with N
activity slots runs them all; each activity sleeps ``--sleep-seconds`` and then makes an HTTP
call that the slow endpoint holds ``--http-seconds`` (1 s of I/O in total by default). Printed:
the wall time from the first activity start to the last completion, the dispatch time (first
to last start: how fast the single poller leases N tasks from the server), the ideal
``I/O + dispatch``, and the worker's peak RSS.

(b) ``--part cpu``: N no-op activities, enqueued first, run by a worker with the default 10
slots; the worker child measures its own user+sys CPU (``resource.getrusage``) from just
before the first task to the last completion. Printed: CPU per task for each pool and the
gevent/threads ratio (target: within 10%). ``--sdk`` adds the published SDK's worker
(``durable_workflow``, asyncio) on the same server.

Figures are printed, never asserted: they depend on the machine.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and len(sys.argv) > 2 and sys.argv[1] == "_worker" and sys.argv[2] == "gevent":
    from gevent import monkey  # patch first, before anything else is imported

    monkey.patch_all()

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

IO_TYPE = "bench.io_wait"
NOOP_TYPE = "bench.noop"


# ---------------------------------------------------------------------------------------------
# child processes: dev server and slow HTTP endpoint


def _start_child(args: List[str], ready_pattern: str) -> tuple[subprocess.Popen[str], str]:
    """Start a child and wait for a line matching ``ready_pattern`` on its stderr (group 1: URL)."""
    process = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, PYTHONPATH=REPO))
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    seen: List[str] = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        match = re.search(ready_pattern, line)
        if match:
            # keep draining stderr so the child never blocks on a full pipe
            threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()  # type: ignore
            return process, match.group(1)
    process.kill()
    raise RuntimeError(f"child {args} did not start:\n{''.join(seen)}")


def _stop_child(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


SLOW_SERVER = r"""
from gevent import monkey; monkey.patch_all()
import sys, gevent
from gevent.pywsgi import WSGIServer
hold = float(sys.argv[1])
def app(environ, start_response):
    gevent.sleep(hold)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
server = WSGIServer(("127.0.0.1", 0), app, log=None, backlog=4096)
server.init_socket()
sys.stderr.write("slow endpoint on http://127.0.0.1:%d/\n" % server.server_port); sys.stderr.flush()
server.serve_forever()
"""


# ---------------------------------------------------------------------------------------------
# the worker child


class _Timeline:
    """Metrics recorder that notes when each task finished (thread- and greenlet-safe enough)."""

    def __init__(self) -> None:
        self.done: List[float] = []
        self.outcomes: Dict[str, int] = {}

    def increment(self, name: str, value: float, tags: Dict[str, str]) -> None:
        if name == "durable_workflow_worker_tasks":
            self.done.append(time.monotonic())
            outcome = tags.get("outcome", "?")
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def record(self, name: str, value: float, tags: Dict[str, str]) -> None:
        pass


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker_child(pool: str, url: str, queue: str, count: int, slots: int, sleep_seconds: float,
                 slow_url: str, gate: bool) -> None:
    import requests

    from sync_worker import activity
    from sync_worker.client import Client
    from sync_worker.worker import Worker

    starts: List[float] = []
    http = threading.local()
    all_started = threading.Event()
    running = {"now": 0, "peak": 0}

    @activity.defn(name=IO_TYPE)
    def io_wait() -> int:
        starts.append(time.monotonic())
        running["now"] += 1  # approximate under threads; exact under gevent
        running["peak"] = max(running["peak"], running["now"])
        if len(starts) >= count:
            all_started.set()
        if gate:  # hold every activity until all have started: all N wait on I/O at the same time
            all_started.wait(300)
        time.sleep(sleep_seconds)
        session = getattr(http, "session", None)
        if session is None:
            session = http.session = requests.Session()
            session.trust_env = False  # no ~/.netrc or proxy lookups per request
        response = session.get(slow_url, timeout=60)
        running["now"] -= 1
        return response.status_code

    @activity.defn(name=NOOP_TYPE)
    def noop() -> None:
        if not starts:
            starts.append(time.monotonic())

    timeline = _Timeline()
    client = Client(url, max_connections=slots + 8)  # pollers + slots: no "connection pool is full"
    worker = Worker(client, task_queue=queue, activities=[io_wait, noop], pool=pool, poll_timeout=5.0,
                    max_concurrent_activity_tasks=slots, metrics=timeline, shutdown_timeout=30.0)
    errors: List[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as error:  # reported to the driver
            errors.append(error)

    cpu_before = _cpu_seconds()
    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    deadline = time.monotonic() + 300
    while len(timeline.done) < count and time.monotonic() < deadline and not errors:
        time.sleep(0.02)
    cpu_after = _cpu_seconds()
    worker.stop()
    runner.join(30)
    result = {
        "pool": worker.backend.name,
        "count": count,
        "finished": len(timeline.done),
        "outcomes": timeline.outcomes,
        "first_start": min(starts) if starts else None,
        "last_start": max(starts) if starts else None,
        "peak_running": running["peak"],
        "first_done": min(timeline.done) if timeline.done else None,
        "last_done": max(timeline.done) if timeline.done else None,
        "cpu_seconds": cpu_after - cpu_before,
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "errors": [repr(e) for e in errors],
    }
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()


def sdk_worker_child(url: str, queue: str, count: int) -> None:
    """The published SDK's worker (asyncio) on the same no-op tasks; measured the same way."""
    import asyncio

    from durable_workflow import Client, Worker, activity

    timeline = _Timeline()

    class Recorder:
        def increment(self, name: str, value: float = 1.0, tags: Optional[Dict[str, str]] = None) -> None:
            timeline.increment(name, value, dict(tags or {}))

        def record(self, name: str, value: float, tags: Optional[Dict[str, str]] = None) -> None:
            pass

        def set_gauge(self, name: str, value: float, tags: Optional[Dict[str, str]] = None) -> None:
            pass

    @activity.defn(name=NOOP_TYPE)
    def noop() -> None:
        return None

    async def main() -> Dict[str, Any]:
        client = Client(url)
        worker = Worker(client, task_queue=queue, activities=[noop], max_concurrent_activity_tasks=10,
                        poll_timeout=5.0, metrics=Recorder())  # type: ignore[arg-type]
        cpu_before = _cpu_seconds()
        task = asyncio.ensure_future(worker.run())
        deadline = time.monotonic() + 300
        while len(timeline.done) < count and time.monotonic() < deadline and not task.done():
            await asyncio.sleep(0.02)
        cpu_after = _cpu_seconds()
        await worker.stop()
        try:
            await asyncio.wait_for(task, 30)
        except BaseException:
            pass
        return {"pool": "sdk", "count": count, "finished": len(timeline.done), "outcomes": timeline.outcomes,
                "cpu_seconds": cpu_after - cpu_before,
                "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}

    result = asyncio.run(main())
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    sys.stdout.flush()


class _InstantClient:
    """Worker-plane stand-in answering at once from memory: measures the runtime alone (no HTTP)."""

    namespace = "default"
    timeout = 5.0
    transport_retries = 1

    def __init__(self, count: int) -> None:
        self._next = 0
        self.count = count

    def validate_worker_compatibility(self, *, refresh: bool = True) -> Dict[str, Any]:
        return {}

    def server_capabilities(self) -> Dict[str, Any]:
        return {}

    def register_worker(self, body: Dict[str, Any], **_: Any) -> Dict[str, Any]:
        return {"worker_id": body["worker_id"], "registered": True}

    def heartbeat_worker(self, body: Dict[str, Any], **_: Any) -> Dict[str, Any]:
        return {}

    def deregister_worker_legacy(self, worker_id: str, **_: Any) -> Dict[str, Any]:
        return {"worker_id": worker_id, "outcome": "deregistered"}

    def poll_activity_task(self, *, cancel: Any = None, **_: Any) -> Optional[Dict[str, Any]]:
        if self._next >= self.count:
            if cancel is not None:
                cancel.wait(0.05)
            return None
        self._next += 1
        return {"task_id": f"t{self._next}", "activity_type": NOOP_TYPE, "activity_attempt_id": f"a{self._next}",
                "attempt_number": 1, "payload_codec": "avro", "arguments": None}

    def complete_activity_task(self, task_id: str, **_: Any) -> Dict[str, Any]:
        return {}

    def fail_activity_task(self, task_id: str, **_: Any) -> Dict[str, Any]:
        return {}


def runtime_child(pool: str, count: int) -> None:
    """CPU per task of the worker runtime alone (slots, pollers, spawn, context) on ``pool``."""
    from sync_worker import activity
    from sync_worker.worker import Worker

    @activity.defn(name=NOOP_TYPE)
    def noop() -> None:
        return None

    timeline = _Timeline()
    worker = Worker(_InstantClient(count), task_queue="bench", activities=[noop], pool=pool, metrics=timeline,
                    poll_timeout=1.0)
    cpu_before = _cpu_seconds()
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    while len(timeline.done) < count:
        time.sleep(0.01)
    cpu = _cpu_seconds() - cpu_before
    worker.stop()
    sys.stdout.write("RESULT " + json.dumps({"pool": pool, "per_unit": cpu / count}) + "\n")


def http_child(pool: str, url: str, count: int) -> None:
    """CPU per request of one keep-alive ``requests`` session on ``pool``'s sockets."""
    import requests

    session = requests.Session()
    session.trust_env = False
    for _ in range(20):
        session.get(url, timeout=10)
    cpu_before = _cpu_seconds()
    for _ in range(count):
        session.get(url, timeout=10)
    cpu = _cpu_seconds() - cpu_before
    sys.stdout.write("RESULT " + json.dumps({"pool": pool, "per_unit": cpu / count}) + "\n")


# ---------------------------------------------------------------------------------------------
# driver


def _enqueue(url: str, queue: str, activity_type: str, count: int) -> None:
    from sync_worker.client import Client

    clients = [Client(url) for _ in range(8)]
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: clients[i % 8].start_activity(activity_type, task_queue=queue,
                                                                  start_to_close_timeout_seconds=600,
                                                                  schedule_to_close_timeout_seconds=3600),
                          range(count)))
    finally:
        for client in clients:
            client.close()


def _run_worker(pool: str, url: str, queue: str, count: int, slots: int, sleep_seconds: float,
                slow_url: str, gate: bool = False) -> Dict[str, Any]:
    args = [sys.executable, os.path.abspath(__file__), "_worker", pool, url, queue, str(count), str(slots),
            str(sleep_seconds), slow_url or "-", "gate" if gate else "-"]
    completed = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600,
                               env=dict(os.environ, PYTHONPATH=REPO))
    for line in completed.stdout.splitlines():
        if line.startswith("RESULT "):
            result: Dict[str, Any] = json.loads(line[len("RESULT "):])
            return result
    raise RuntimeError(f"worker child failed ({completed.returncode}):\n{completed.stdout}\n{completed.stderr[-4000:]}")


def part_io(url: str, slow_url: str, count: int, sleep_seconds: float, http_seconds: float, gate: bool) -> None:
    io_seconds = sleep_seconds + http_seconds
    print(f"\n(a) {count} activities, each {sleep_seconds:g} s sleep + {http_seconds:g} s HTTP call "
          f"({io_seconds:g} s of I/O), {count} activity slots, one worker process"
          + (" (gated: the I/O starts once all are running)" if gate else ""))
    rows = []
    for pool in ("gevent", "threads"):
        queue = f"bench-io-{pool}-{os.getpid()}"
        _enqueue(url, queue, IO_TYPE, count)
        r = _run_worker(pool, url, queue, count, count, sleep_seconds, slow_url, gate)
        if r["finished"] < count or r["first_start"] is None:
            print(f"  {pool}: only {r['finished']}/{count} finished; {r['outcomes']} {r['errors']}")
            continue
        wall = r["last_done"] - r["first_start"]
        dispatch = r["last_start"] - r["first_start"]
        tail = r["last_done"] - r["last_start"]
        spread = r["last_done"] - r["first_done"]
        rows.append((pool, wall, dispatch, io_seconds + dispatch, tail, spread, r["peak_running"],
                     r["peak_rss_kib"] / 1024.0, r["outcomes"]))
    print(f"  {'pool':8} {'wall s':>7} {'dispatch s':>10} {'1s+dispatch':>11} {'last I/O s':>10} "
          f"{'completions s':>13} {'peak running':>12} {'peak RSS MiB':>12}  outcomes")
    for pool, wall, dispatch, ideal, tail, spread, peak, rss, outcomes in rows:
        print(f"  {pool:8} {wall:7.2f} {dispatch:10.2f} {ideal:11.2f} {tail:10.2f} {spread:13.2f} {peak:12d} "
              f"{rss:12.1f}  {outcomes}")
    print("  wall = first activity start -> last completion reported; dispatch = first -> last start "
          "(the single poller leasing every task from the server); last I/O = last start -> last completion; "
          "completions = first -> last completion reported")


def part_cpu(url: str, count: int, with_sdk: bool, repeat: int) -> None:
    print(f"\n(b) worker CPU (user+sys) per no-op activity, {count} tasks, 10 activity slots, "
          f"{repeat} interleaved round(s); median per pool")
    samples: Dict[str, List[float]] = {}
    modes = ["threads", "gevent"] + (["sdk"] if with_sdk else [])
    for round_number in range(repeat):
        for mode in modes:
            queue = f"bench-cpu-{mode}-{os.getpid()}-{round_number}"
            _enqueue(url, queue, NOOP_TYPE, count)
            r = _run_worker(mode, url, queue, count, 10, 0.0, "")
            if r["finished"] < count:
                print(f"  {mode}: only {r['finished']}/{count} finished: {r}")
                continue
            samples.setdefault(mode, []).append(r["cpu_seconds"] / count)
            print(f"  round {round_number + 1} {mode:8} {r['cpu_seconds']:6.2f} s CPU "
                  f"{r['cpu_seconds'] / count * 1e3:7.3f} ms/task  peak RSS {r['peak_rss_kib'] / 1024.0:.1f} MiB")
    per_task = {mode: statistics.median(values) for mode, values in samples.items()}
    for mode, value in per_task.items():
        print(f"  median {mode:8} {value * 1e3:7.3f} ms/task")
    if "threads" in per_task and "gevent" in per_task:
        ratio = per_task["gevent"] / per_task["threads"]
        print(f"  gevent/threads CPU per task: {ratio:.3f} (target within 10%: "
              f"{'yes' if abs(ratio - 1) <= 0.10 else 'no'})")
    if "sdk" in per_task and "threads" in per_task:
        print(f"  published SDK/threads CPU per task: {per_task['sdk'] / per_task['threads']:.3f}")


def _run_probe(kind: str, pool: str, *args: str) -> float:
    completed = subprocess.run([sys.executable, os.path.abspath(__file__), "_worker", pool, "-", "-", "0", "0",
                                "0", "-", "-", kind, *args], cwd=REPO, capture_output=True, text=True,
                               timeout=600, env=dict(os.environ, PYTHONPATH=REPO))
    for line in completed.stdout.splitlines():
        if line.startswith("RESULT "):
            return float(json.loads(line[len("RESULT "):])["per_unit"])
    raise RuntimeError(f"{kind} probe failed:\n{completed.stdout}\n{completed.stderr[-4000:]}")


def part_breakdown(url: str, repeat: int) -> None:
    print(f"\n(c) where (b)'s CPU goes: the runtime alone (in-memory client, 5000 no-op tasks) and one HTTP "
          f"request (keep-alive GET /api/cluster/info, 2000 requests); median of {repeat}")
    for label, kind, args, unit in (("runtime per task", "runtime", ["5000"], "us"),
                                    ("HTTP per request", "http", [url + "/api/cluster/info", "2000"], "us")):
        medians = {}
        for pool in ("threads", "gevent"):
            values = [_run_probe(kind, pool, *args) for _ in range(repeat)]
            medians[pool] = statistics.median(values)
        print(f"  {label:17} threads {medians['threads'] * 1e6:7.1f} {unit}   gevent {medians['gevent'] * 1e6:7.1f} "
              f"{unit}   gevent/threads {medians['gevent'] / medians['threads']:.3f}")


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["io", "cpu", "breakdown", "all"], default="all")
    parser.add_argument("--activities", type=int, default=1000, help="(a) concurrent activities")
    parser.add_argument("--sleep-seconds", type=float, default=0.5, help="(a) sleep per activity")
    parser.add_argument("--http-seconds", type=float, default=0.5, help="(a) slow endpoint hold per request")
    parser.add_argument("--no-gate", dest="gate", action="store_false",
                        help="(a) start each activity's I/O at once instead of when all have started")
    parser.add_argument("--tasks", type=int, default=2000, help="(b) no-op activities")
    parser.add_argument("--sdk", action="store_true", help="(b) also run the published SDK's worker")
    parser.add_argument("--repeat", type=int, default=3, help="(b) interleaved rounds (median reported)")
    args = parser.parse_args(argv)

    server, url = _start_child([sys.executable, "-m", "sync_worker.cli", "devserver", "--port", "0",
                                "--log-level", "WARNING"], r"listening on (http://\S+)")
    slow: Optional[subprocess.Popen[str]] = None
    try:
        print(f"dev server {url} (child pid {server.pid}); python {sys.version.split()[0]}, "
              f"{os.cpu_count()} CPUs")
        if args.part in ("io", "all"):
            slow, slow_url = _start_child([sys.executable, "-c", SLOW_SERVER, str(args.http_seconds)],
                                          r"slow endpoint on (http://\S+)")
            part_io(url, slow_url, args.activities, args.sleep_seconds, args.http_seconds, args.gate)
        if args.part in ("cpu", "all"):
            part_cpu(url, args.tasks, args.sdk, args.repeat)
        if args.part in ("breakdown", "all"):
            part_breakdown(url, args.repeat)
    finally:
        if slow is not None:
            _stop_child(slow)
        _stop_child(server)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        _, _, mode, url, queue, count, slots, sleep_seconds, slow_url, gate = sys.argv[:10]
        probe = sys.argv[10:]
        if probe and probe[0] == "runtime":
            runtime_child(mode, int(probe[1]))
        elif probe and probe[0] == "http":
            http_child(mode, probe[1], int(probe[2]))
        elif mode == "sdk":
            sdk_worker_child(url, queue, int(count))
        else:
            worker_child(mode, url, queue, int(count), int(slots), float(sleep_seconds), slow_url,
                         gate == "gate")
    else:
        main()
