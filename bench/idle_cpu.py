"""CPU an idle worker burns: sync_worker on threads and on gevent beside the published SDK's worker.

    python3 bench/idle_cpu.py                 # 3 rounds x 20 s per worker kind, about 4 minutes
    python3 bench/idle_cpu.py --seconds 10 --rounds 1

A dev server runs in its own child process (never counted). Each measurement is one worker
child process, registered and long-polling an empty task queue: it waits ``--warmup`` seconds,
then reports its own user+system CPU (``resource.getrusage``, all threads) over ``--seconds``.
The kinds alternate within each round. Printed: CPU percent of one core per kind (min / median /
max over rounds) and each kind's median as a ratio of the published SDK's.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Dict, List

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
            start = cpu()
            await asyncio.sleep(seconds)
            used = cpu() - start
            await worker.stop()
            await asyncio.wait_for(runner, timeout=30)
            return used

        used = asyncio.run(main())
    else:
        from sync_worker import Client, Worker, activity

        @activity.defn(name="idle.noop")
        def noop() -> None:
            return None

        worker = Worker(Client(url), task_queue=queue, activities=[noop], pool=kind)
        runner = threading.Thread(target=worker.run, daemon=True)
        runner.start()
        time.sleep(warmup)
        start = cpu()
        time.sleep(seconds)
        used = cpu() - start
        worker.stop()
        runner.join(30)
    print(json.dumps({"kind": kind, "cpu_seconds": used, "seconds": seconds}), flush=True)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=KINDS)
    parser.add_argument("--url")
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.url, args.warmup, args.seconds)
        return
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "sync_worker", "devserver", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results: Dict[str, List[float]] = {kind: [] for kind in KINDS}
    try:
        _wait_ready(url)
        for round_no in range(args.rounds):
            order = KINDS[round_no % len(KINDS):] + KINDS[:round_no % len(KINDS)]
            for kind in order:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", kind, "--url", url, "--seconds", str(args.seconds),
                     "--warmup", str(args.warmup)], check=True, capture_output=True, text=True, timeout=300)
                line = [raw for raw in out.stdout.splitlines() if raw.startswith("{")][-1]
                data = json.loads(line)
                percent = 100.0 * data["cpu_seconds"] / data["seconds"]
                results[kind].append(percent)
                print(f"round {round_no + 1} {kind:8s} {percent:.4f}% of one core", flush=True)
    finally:
        server.terminate()
        server.wait(10)
    print("\nidle worker CPU, percent of one core (min / median / max), and median vs the published SDK")
    sdk = statistics.median(results["sdk"])
    for kind in KINDS:
        values = results[kind]
        median = statistics.median(values)
        ratio = median / sdk if sdk > 0 else float("inf")
        print(f"  {kind:8s} {min(values):.4f} / {median:.4f} / {max(values):.4f}   x{ratio:.2f}")


if __name__ == "__main__":
    main()
