"""CPU an idle worker burns: sync_worker on threads and on gevent beside the published SDK's worker.

    python3 bench/idle_cpu.py                 # 3 rounds x 40 s per worker kind, about 8 minutes
    python3 bench/idle_cpu.py --warmup 25     # the window then holds the first heartbeat (at 60 s)
    python3 bench/idle_cpu.py --seconds 10 --rounds 1

Each measurement is one worker child process on a dev server of its own (a child process too,
never counted), registered and long-polling an empty task queue. sync_worker's children run as
``sync-worker run`` runs them (``serve()`` in the main thread, stopped by SIGTERM), the SDK's
``Worker.run()`` in ``asyncio.run``. A child waits ``--warmup`` seconds (default 8: start-up
is over, gevent's resolver thread of the first connections has exited), then reports its own
user+system CPU (``resource.getrusage``, all threads, microsecond resolution) over
``--seconds`` (40: one long poll answered at 35 s, the concurrency control tick at 30 s, the
hub stamps; the heartbeat, every 60 s, falls after it). The kinds alternate within each round.
Printed: CPU percent of one core per kind (min / median / max over rounds) and each kind's
median as a ratio of the published SDK's; then what woke each kind: wake-ups per second (the
voluntary context switches of all the child's threads in the window, from
``/proc/self/task/*/status``: every return from a blocking wait counts one) and the HTTP
requests the dev server received per minute, by kind (counted from the dev server's DEBUG
request log over each child's window).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Tuple

KINDS = ("sdk", "threads", "gevent")


def _child(kind: str, url: str, warmup: float, seconds: float) -> None:
    if kind == "gevent":
        from gevent import monkey

        monkey.patch_all()
    import resource
    import threading

    queue = f"idle-{kind}-{os.getpid()}"

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def window(seconds: float) -> Dict[str, float]:
        switches, wall, start = _context_switches(), time.time(), cpu()
        time.sleep(seconds)
        used = cpu() - start
        after = _context_switches()
        return {"cpu_seconds": used, "wall_start": wall, "wall_end": time.time(),
                "voluntary_switches": after - switches}

    if kind == "sdk":
        import asyncio

        from durable_workflow import Client as SdkClient
        from durable_workflow import Worker as SdkWorker
        from durable_workflow import activity as sdk_activity

        @sdk_activity.defn(name="idle.noop")
        def sdk_noop() -> None:
            return None

        async def main() -> float:
            worker = SdkWorker(SdkClient(url), task_queue=queue, workflows=[], activities=[sdk_noop])
            runner = asyncio.create_task(worker.run())
            await asyncio.sleep(warmup)
            # The window runs on a thread so that the event loop keeps serving the worker.
            measured = await asyncio.get_running_loop().run_in_executor(None, window, seconds)
            await worker.stop()
            await asyncio.wait_for(runner, timeout=30)
            return measured

        measured = asyncio.run(main())
    else:
        from sync_worker import Client, Worker, activity

        @activity.defn(name="idle.noop")
        def noop() -> None:
            return None

        from sync_worker.worker.cli import serve

        worker = Worker(Client(url), task_queue=queue, activities=[noop], pool=kind)
        results: List[Dict[str, float]] = []

        def measure() -> None:
            time.sleep(warmup)
            results.append(window(seconds))
            os.kill(os.getpid(), signal.SIGTERM)  # a warm shutdown, as a deployment stops it

        # The main thread runs the worker as `sync-worker run` does (serve(): the worker on a
        # thread, the main thread waiting for signals), so what that loop costs is counted too.
        threading.Thread(target=measure, daemon=True).start()
        code = serve(worker)
        if code != 0 or not results:
            raise SystemExit(f"the {kind} worker exited with {code}")
        measured = results[0]
    print(json.dumps({"kind": kind, "seconds": seconds, **measured}), flush=True)


def _context_switches() -> int:
    """Voluntary context switches of every thread of this process (Linux; else 0)."""
    voluntary = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/status") as status:
                for line in status:
                    if line.startswith("voluntary_ctxt_switches:"):
                        voluntary += int(line.split()[1])
        except OSError:  # the thread exited meanwhile
            continue
    return voluntary


# A request in the dev server's DEBUG log: "<asctime> DEBUG sync_worker.devserver...: <addr> POST /path HTTP/1.1"
# (logged as each request arrives; older servers logged '"POST /path HTTP/1.1" 200' as it was answered).
_REQUEST_LINE = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) DEBUG .*?"?(GET|POST|PUT|DELETE) (\S+) HTTP/')


def _request_kind(path: str) -> str:
    path = path.split("?", 1)[0]
    if path.endswith("-tasks/poll"):
        return "poll"
    if path.endswith("/heartbeat"):
        return "heartbeat"
    return "other"


def _requests_in(log_path: str, start: float, end: float) -> Dict[str, int]:
    """Requests the dev server logged between ``start`` and ``end`` (epoch seconds), by kind."""
    counts: Dict[str, int] = {"poll": 0, "heartbeat": 0, "other": 0}
    with open(log_path, errors="replace") as log:
        for line in log:
            match = _REQUEST_LINE.match(line)
            if match is None:
                continue
            when = time.mktime(time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")) + int(match.group(2)) / 1000
            if start <= when <= end:
                counts[_request_kind(match.group(4))] += 1
    return counts


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, timeout: float = 30.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/api/health", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _measure(args: argparse.Namespace, folder: str, results: Dict[str, List[float]],
             wakeups: Dict[str, List[float]], requests: Dict[str, Dict[str, int]], noise: Any) -> None:
    for round_no in range(args.rounds):
        order = KINDS[round_no % len(KINDS):] + KINDS[:round_no % len(KINDS)]
        for kind in order:
            noise.sample(3)
            data, answered = _one(kind, args, os.path.join(folder, f"devserver-{round_no}-{kind}.log"))
            percent = 100.0 * data["cpu_seconds"] / data["seconds"]
            results[kind].append(percent)
            rate = data["voluntary_switches"] / data["seconds"]
            wakeups[kind].append(rate)
            for name, count in answered.items():
                requests[kind][name] += count
            print(f"round {round_no + 1} {kind:8s} {percent:.4f}% of one core, {rate:.2f} wake-ups/s, "
                  f"requests {answered}", flush=True)


def _one(kind: str, args: argparse.Namespace, log_path: str) -> Tuple[Dict[str, Any], Dict[str, int]]:
    """One child on a dev server of its own (so a long poll the previous child left behind is never
    counted as this one's); DEBUG makes the server log every request it answers."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "sync_worker", "devserver", "--port", str(port),
                                   "--log-level", "DEBUG"], stdout=subprocess.DEVNULL, stderr=log)
        try:
            _wait_ready(url)
            out = subprocess.run(
                [sys.executable, __file__, "--child", kind, "--url", url, "--seconds", str(args.seconds),
                 "--warmup", str(args.warmup)], check=True, capture_output=True, text=True, timeout=300)
        finally:
            server.terminate()
            server.wait(10)
    line = [raw for raw in out.stdout.splitlines() if raw.startswith("{")][-1]
    data: Dict[str, Any] = json.loads(line)
    return data, _requests_in(log_path, data["wall_start"], data["wall_end"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=KINDS)
    parser.add_argument("--url")
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.url, args.warmup, args.seconds)
        return
    results: Dict[str, List[float]] = {kind: [] for kind in KINDS}
    wakeups: Dict[str, List[float]] = {kind: [] for kind in KINDS}
    requests: Dict[str, Dict[str, int]] = {kind: {"poll": 0, "heartbeat": 0, "other": 0} for kind in KINDS}
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _noise import NoiseProbe

    noise = NoiseProbe()
    with tempfile.TemporaryDirectory(prefix="idle-cpu-") as folder:
        _measure(args, folder, results, wakeups, requests, noise)
    noise.sample(3)
    print("\nidle worker CPU, percent of one core (min / median / max), and median vs the published SDK")
    print(noise.report())
    sdk = statistics.median(results["sdk"])
    for kind in KINDS:
        values = results[kind]
        median = statistics.median(values)
        ratio = median / sdk if sdk > 0 else float("inf")
        print(f"  {kind:8s} {min(values):.4f} / {median:.4f} / {max(values):.4f}   x{ratio:.2f}")
    minutes = args.rounds * args.seconds / 60.0
    print("\nwhat woke it: wake-ups per second (min / median / max), requests per minute by kind")
    for kind in KINDS:
        rates = wakeups[kind]
        per_minute = ", ".join(f"{name} {count / minutes:.2f}" for name, count in requests[kind].items())
        print(f"  {kind:8s} {min(rates):.2f} / {statistics.median(rates):.2f} / {max(rates):.2f}   {per_minute}")


if __name__ == "__main__":
    main()
