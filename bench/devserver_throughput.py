"""Dev server throughput: activities/s (poll + complete) with 4 worker processes, as the store fills.

    python3 bench/devserver_throughput.py                       # every case, 3 rounds
    python3 bench/devserver_throughput.py --rounds 1 --kinds threads-p4,gevent-p4 --cases 300:0

The dev server (``sync_worker.devserver.DevServer``, SQLite file in WAL mode) runs in its own
process pinned to core 0 ("one core"); the four worker processes are pinned to core 1 (``--no-pin-workers``
leaves them free to share core 0 with the server, as before). Before the server starts, the
database is filled in process: ``ready + measured`` standalone activities on queue ``bench``
(so the ready backlog stays between ``ready`` and ``ready + measured`` while ``measured``
activities are timed) and ``stored`` workflow runs on a queue nobody polls. Cases are
``ready:stored`` pairs (300 and 10,000 ready; 0 and 100,000 stored runs).

Worker kinds: ``sdk`` (the published ``durable-workflow`` worker), ``threads`` / ``gevent``
(ours, one activity poller), ``threads-p4`` / ``gevent-p4`` (four activity pollers,
``max_concurrent_activity_task_polls=4``). Each worker has 10 activity slots. The parent
times the measured completions by reading the database (read-only, every 10 ms) and prints
activities/s and the server's CPU share over that window, from ``/proc`` (near 100% means the
server is the bottleneck; well below means the workers or the machine are).

``raw`` (not in the default set) is the cheapest client that can drive the server, see
:func:`raw_worker`: with it the server, not the workers, is the limit, so its rate is what the
server does on its one core.

Besides activities/s, the summary prints the server's own ms CPU per activity (CPU seconds of the
server process over the timed window / completions) with min/median/max over the rounds: the
figure to judge flatness by on a noisy machine, since it does not depend on how fast the workers
on the other core happened to be.

``DEVSERVER_BENCH_GROUP_COMMIT=0`` runs the server with ``group_commit=False`` (one COMMIT per
transaction); ``DEVSERVER_BENCH_TREE=DIR`` runs every process on another tree's ``sync_worker``
(a baseline in the same minute). Each case also prints the server's COMMITs per activity.

``--workflows N`` also times N one-activity workflows (start, workflow task, activity, workflow
task, completed) with our worker (4 processes, workflow and activity pollers).
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
import shutil
import signal
import sqlite3
import statistics
import subprocess
import tempfile
import threading
import time
from typing import Dict, List, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
#: Another tree's ``sync_worker`` for every process of this bench (a baseline in the same run:
#: ``git archive <commit> sync_worker | tar -x -C DIR``; ``devserver_targets.py --baseline DIR``).
BASELINE_TREE = os.environ.get("DEVSERVER_BENCH_TREE")
if BASELINE_TREE:
    sys.path.insert(0, BASELINE_TREE)

QUEUE = "bench"
NOOP_TYPE = "bench.noop"
FLOW_TYPE = "bench.one_activity"
KINDS = ("sdk", "threads", "gevent", "threads-p4", "gevent-p4")
EXTRA_KINDS = ("raw",)  # not in the default set: the server-bound client, see raw_worker
CASES = ("300:0", "10000:0", "300:100000", "10000:100000")
SERVER_CORE = 0
WORKER_CORE = 1
PIN_WORKERS = True  # --no-pin-workers: the workers share both cores with the server
WORKERS = 4


def _pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > core:
        os.sched_setaffinity(0, {core})


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- filling the store (in process, before the server starts) ---------------------------------------

def fill(db: str, *, activities: int = 0, stored: int = 0, workflows: int = 0) -> None:
    from sync_worker.devserver import control
    from sync_worker.devserver.engine import Config, Engine
    from sync_worker.payloads import envelope

    engine = Engine(Config(), db)
    args = envelope([])
    batch = 2000
    with engine.lock:
        for start in range(0, stored, batch):
            with engine.tx():
                for n in range(start, min(stored, start + batch)):
                    control.start_workflow(engine, "default", {"workflow_id": f"stored-{n}", "workflow_type": "t",
                                                               "task_queue": "nobody", "input": args})
        for start in range(0, activities, batch):
            with engine.tx():
                for _ in range(start, min(activities, start + batch)):
                    control.start_activity(engine, "default", {"activity_type": NOOP_TYPE, "task_queue": QUEUE,
                                                               "input": args})
        with engine.tx():
            for n in range(workflows):
                control.start_workflow(engine, "default", {"workflow_id": f"flow-{n}", "workflow_type": FLOW_TYPE,
                                                           "task_queue": QUEUE, "input": args})
    engine.store.close()


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of another process (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _done_count(db: str, what: str) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        if what == "activities":
            sql = "SELECT COUNT(*) FROM activities WHERE state = 'done'"
        else:
            sql = "SELECT COUNT(*) FROM runs WHERE status = 'completed' AND workflow_id LIKE 'flow-%'"
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


# -- the processes ---------------------------------------------------------------------------------

def server_child(db: str) -> None:
    _pin(SERVER_CORE)
    from sync_worker.devserver import DevServer

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    options = {}
    if os.environ.get("DEVSERVER_BENCH_GROUP_COMMIT") == "0":  # one COMMIT per transaction
        options["group_commit"] = False
    with DevServer(port=0, db=db, **options) as server:
        start = _cpu()
        print(f"PORT {server.port}", flush=True)
        stop.wait()
        print("CPU " + json.dumps(_cpu() - start), flush=True)
        print("COMMITS " + json.dumps(getattr(server.engine.store, "_commits", 0)), flush=True)


def _raw_request(path: str, host: str, body: Dict[str, object], accept: str = "application/json") -> bytes:
    data = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: identity\r\n"
            f"Content-Length: {len(data)}\r\nUser-Agent: devserver-bench-raw\r\nContent-Type: application/json\r\n"
            f"Accept: {accept}\r\nX-Namespace: default\r\nX-Durable-Workflow-Protocol-Version: 1.20\r\n\r\n")
    return head.encode() + data


def raw_worker(url: str, stop: threading.Event) -> None:
    """The cheapest client that can drive the server: one keep-alive socket, poll then complete.

    It sends what our worker's transport sends (same headers, same bodies) but parses the
    response by hand, so its own CPU per activity is a fraction of the server's and the server
    (pinned to its core) becomes the limit: the rate it reaches is the server's one-core rate.
    """
    import socket
    import uuid

    host = url.split("//", 1)[1]
    address, port = host.rsplit(":", 1)
    sock = socket.create_connection((address, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader = sock.makefile("rb")
    worker_id = f"raw-{uuid.uuid4().hex[:8]}"

    def call(request: bytes) -> Dict[str, object]:
        sock.sendall(request)
        length = 0
        while True:
            line = reader.readline()
            if line in (b"\r\n", b""):
                break
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        answer: Dict[str, object] = json.loads(reader.read(length))
        return answer

    call(_raw_request("/api/worker/register", host, {"worker_id": worker_id, "task_queue": QUEUE, "runtime": "python",
                                                    "supported_activity_types": [NOOP_TYPE]}))
    from sync_worker.payloads import envelope

    result = envelope(None)
    while not stop.is_set():
        answer = call(_raw_request("/api/worker/activity-tasks/poll", host, {
            "worker_id": worker_id, "task_queue": QUEUE, "poll_request_id": f"activity-poll-{uuid.uuid4().hex}",
            "timeout_seconds": 1}, "application/vnd.durable-workflow.poll.v1+json, application/json;q=0.9"))
        task = answer.get("task")
        if isinstance(task, dict):
            call(_raw_request(f"/api/worker/activity-tasks/{task['task_id']}/complete", host, {
                "activity_attempt_id": task["activity_attempt_id"], "lease_owner": worker_id, "result": result}))
    sock.close()


def worker_child(kind: str, url: str, flows: bool) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if kind == "raw":
        raw_worker(url, stop)
        return
    if kind == "sdk":
        import asyncio

        from durable_workflow import Client as SdkClient
        from durable_workflow import Worker as SdkWorker
        from durable_workflow import activity as sdk_activity

        @sdk_activity.defn(name=NOOP_TYPE)
        def sdk_noop() -> None:
            return None

        async def main() -> None:
            worker = SdkWorker(SdkClient(url), task_queue=QUEUE, activities=[sdk_noop],
                               max_concurrent_activity_tasks=10, poll_timeout=5.0)
            runner = asyncio.ensure_future(worker.run())
            while not stop.is_set() and not runner.done():
                await asyncio.sleep(0.02)
            await worker.stop()
            try:
                await asyncio.wait_for(runner, 10)
            except BaseException:
                pass

        asyncio.run(main())
        return
    from typing import Any as _Any

    from sync_worker import Client, Worker, activity, workflow

    @activity.defn(name=NOOP_TYPE)
    def noop() -> None:
        return None

    @workflow.defn(name=FLOW_TYPE)
    class OneActivity:
        def run(self, ctx: _Any) -> _Any:
            value = yield ctx.schedule_activity(NOOP_TYPE, [])
            return value

    pool, _, suffix = kind.partition("-")
    polls = int(suffix[1:]) if suffix.startswith("p") and suffix[1:].isdigit() else 1
    worker = Worker(Client(url), task_queue=QUEUE, activities=[noop], workflows=[OneActivity] if flows else [],
                    pool=pool, max_concurrent_activity_tasks=10, max_concurrent_activity_task_polls=polls,
                    max_concurrent_workflow_task_polls=polls, poll_timeout=5.0, shutdown_timeout=5.0)
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    while not stop.wait(0.05):
        pass
    worker.stop()
    runner.join(10)


def _measure(db: str, kind: str, what: str, target: int, flows: bool = False) -> Dict[str, float]:
    server = subprocess.Popen([sys.executable, __file__, "_server", db], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline().split()[1])
    url = f"http://127.0.0.1:{port}"
    worker_pin = {"preexec_fn": lambda: _pin(WORKER_CORE)} if PIN_WORKERS else {}
    workers = [subprocess.Popen([sys.executable, __file__, "_worker", kind, url, "1" if flows else "0"], **worker_pin,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
               for _ in range(WORKERS)]
    first = last = cpu_first = cpu_last = 0.0
    first_done = 0
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            done = _done_count(db, what)
            now = time.monotonic()
            if done and not first:
                first, first_done, cpu_first = now, done, _proc_cpu(server.pid)
            if done >= target:
                last, cpu_last = now, _proc_cpu(server.pid)
                break
            if any(w.poll() is not None for w in workers):
                failed = next(w for w in workers if w.poll() is not None)
                raise RuntimeError(f"a {kind} worker exited:\n{failed.stderr.read()[-2000:] if failed.stderr else ''}")
            time.sleep(0.01)
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
        server.send_signal(signal.SIGTERM)
        rest = server.communicate(timeout=30)[0]
    if not last:
        raise RuntimeError(f"{kind}: {target} {what} not done within the time limit")
    if not [line for line in rest.splitlines() if line.startswith("CPU ")]:
        raise RuntimeError("the dev server did not report its CPU")
    wall = max(1e-6, last - first)
    commits = [int(line.split()[1]) for line in rest.splitlines() if line.startswith("COMMITS ")]
    done = _done_count(db, what)
    return {"rate": (target - first_done) / wall, "server_share": (cpu_last - cpu_first) / wall,
            "commits": (commits[0] / done) if commits and done else float("nan")}


def _template(directory: str, stored: int) -> str:
    path = os.path.join(directory, f"stored-{stored}.sqlite")
    if not os.path.exists(path):
        started = time.monotonic()
        fill(path, stored=stored)
        print(f"(filled {stored} stored runs in {time.monotonic() - started:.1f} s)", flush=True)
    return path


def _copy(template: str, target: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(template + suffix):
            shutil.copyfile(template + suffix, target + suffix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--measured", type=int, default=1500, help="completions timed per case")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--cases", default=",".join(CASES), help="ready:stored pairs")
    parser.add_argument("--workflows", type=int, default=0, help="also time N one-activity workflows")
    parser.add_argument("--no-pin-workers", action="store_true",
                        help="do not pin the worker processes to core 1 (they then share core 0 with the server)")
    args = parser.parse_args()
    global PIN_WORKERS
    PIN_WORKERS = not args.no_pin_workers
    from _noise import NoiseProbe

    noise = NoiseProbe(core=WORKER_CORE)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS + EXTRA_KINDS]
    if unknown:
        parser.error(f"unknown kinds {unknown}; choose from {', '.join(KINDS + EXTRA_KINDS)}")
    cases: List[Tuple[int, int]] = [(int(c.split(":")[0]), int(c.split(":")[1])) for c in args.cases.split(",") if c]
    results: Dict[Tuple[str, int, int], List[float]] = {}
    costs: Dict[Tuple[str, int, int], List[float]] = {}  # the server's ms CPU per activity
    flows: Dict[str, List[float]] = {}
    flow_costs: Dict[str, List[float]] = {}  # the server's ms CPU per one-activity workflow
    with tempfile.TemporaryDirectory(prefix="devserver-bench-") as directory:
        for round_no in range(args.rounds):
            order = kinds[round_no % len(kinds):] + kinds[:round_no % len(kinds)]
            for ready, stored in cases:
                for kind in order:
                    db = os.path.join(directory, "run.sqlite")
                    _copy(_template(directory, stored), db)
                    fill(db, activities=ready + args.measured)
                    noise.sample(3)
                    one = _measure(db, kind, "activities", args.measured)
                    results.setdefault((kind, ready, stored), []).append(one["rate"])
                    ms_cpu = 1000 * one["server_share"] / max(1e-9, one["rate"])
                    costs.setdefault((kind, ready, stored), []).append(ms_cpu)
                    print(f"round {round_no + 1} {kind:11s} ready {ready:6d} stored {stored:6d}: "
                          f"{one['rate']:6.0f} activities/s  server {100 * one['server_share']:.0f}% of a core, "
                          f"{1000 * one['server_share'] / max(1e-9, one['rate']):.2f} ms CPU/activity, "
                          f"{one['commits']:.2f} commits/activity", flush=True)
                    for suffix in ("", "-wal", "-shm"):
                        if os.path.exists(db + suffix):
                            os.unlink(db + suffix)
            if args.workflows:
                for kind in [k for k in order if k not in ("sdk", "raw")]:
                    db = os.path.join(directory, "flows.sqlite")
                    fill(db, workflows=args.workflows)
                    one = _measure(db, kind, "workflows", args.workflows, flows=True)
                    flows.setdefault(kind, []).append(one["rate"])
                    flow_costs.setdefault(kind, []).append(1000 * one["server_share"] / max(1e-9, one["rate"]))
                    print(f"round {round_no + 1} {kind:11s} {one['rate']:6.0f} one-activity workflows/s  "
                          f"server {100 * one['server_share']:.0f}% of a core, "
                          f"{flow_costs[kind][-1]:.2f} ms CPU/workflow", flush=True)
                    for suffix in ("", "-wal", "-shm"):
                        if os.path.exists(db + suffix):
                            os.unlink(db + suffix)

    noise.sample(3)
    print(f"\nactivities/s with {WORKERS} worker processes ({'pinned to core 1' if PIN_WORKERS else 'not pinned'}), "
          f"{args.measured} timed per case; median (min..max) over {args.rounds} round(s)")
    print(noise.report())
    for ready, stored in cases:
        sdk = results.get(("sdk", ready, stored))
        for kind in kinds:
            rates = results[(kind, ready, stored)]
            line = (f"  ready {ready:6d} stored {stored:6d} {kind:11s} {statistics.median(rates):6.0f} "
                    f"({min(rates):.0f}..{max(rates):.0f})")
            if sdk and kind != "sdk":
                line += f"  x{statistics.median(rates) / statistics.median(sdk):.2f} the SDK"
            print(line)
    for kind in kinds:
        rates = [statistics.median(results[(kind, r, s)]) for r, s in cases]
        if rates:
            print(f"  {kind:11s} flatness across cases: slowest/fastest = {min(rates) / max(rates):.2f}")
    print(f"\nthe server's own ms CPU per activity (poll + complete; from /proc, independent of the workers' speed); "
          f"median (min..max) over {args.rounds} round(s)")
    for ready, stored in cases:
        for kind in kinds:
            ms = costs[(kind, ready, stored)]
            print(f"  ready {ready:6d} stored {stored:6d} {kind:11s} {statistics.median(ms):.3f} "
                  f"({min(ms):.3f}..{max(ms):.3f}) ms  = {1000 / statistics.median(ms):5.0f} activities/s per core")
    for kind in kinds:
        medians = [statistics.median(costs[(kind, r, s)]) for r, s in cases]
        if len(medians) > 1:
            print(f"  {kind:11s} server cost flatness across cases: "
                  f"cheapest/dearest = {min(medians) / max(medians):.2f}")
    for pool in ("", "-p4"):
        threads, gevent = results.get(("threads" + pool, *cases[0])), results.get(("gevent" + pool, *cases[0]))
        if threads and gevent:
            ratio = statistics.median(threads) / statistics.median(gevent)
            print(f"  threads{pool} / gevent{pool} (first case): {ratio:.2f}")
    for kind, rates in flows.items():
        ms = flow_costs[kind]
        print(f"  {kind:11s} {statistics.median(rates):6.0f} one-activity workflows/s "
              f"({min(rates):.0f}..{max(rates):.0f}); server {statistics.median(ms):.2f} "
              f"({min(ms):.2f}..{max(ms):.2f}) ms CPU per workflow = {1000 / statistics.median(ms):.0f} "
              f"workflows/s per core")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_server":
        server_child(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "_fill":
        fill(sys.argv[2], **json.loads(sys.argv[3]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_worker":
        worker_child(sys.argv[2], sys.argv[3], sys.argv[4] == "1")
    else:
        main()
