"""Large payloads through external storage: sync_worker beside the published SDK, one run each.

    python3 bench/external_storage.py                    # 20 runs x 1 MiB, threshold 64 KiB
    python3 bench/external_storage.py --runs 40 --size 2097152 --rounds 3

Each side, in its own process, starts ``--runs`` workflows whose argument is ``--size`` bytes
of text through its own client, runs them on its own worker (one activity that returns the text
reversed: a large result), and reads every result; both use the local-filesystem driver in a
fresh directory and the same threshold, against one dev server process. Printed per side:
wall time and the process's CPU (client + worker: storing, fetching, sha256, codec) per run,
then ours / SDK's as ratios. The dev server's CPU is not counted (it only keeps references).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Dict, List, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _serve() -> Tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    proc = subprocess.Popen([sys.executable, "-m", "sync_worker.cli", "devserver", "--port", str(port), "--db",
                             ":memory:"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONPATH=REPO))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the dev server did not start")


def _texts(runs: int, size: int) -> List[str]:
    """One distinct ``size``-character text per run (distinct objects, as real payloads are)."""
    base = ("large payload " * (size // 14 + 1))[:size]
    return [f"{index:08d}-{uuid.uuid4().hex}" + base[41:] for index in range(runs)]


def _ours(url: str, root: str, runs: int, size: int, threshold: int) -> Dict[str, float]:
    from sync_worker import Client, LocalFilesystemExternalStorage, Worker, activity, workflow

    @activity.defn(name="bench.ext.reverse")
    def reverse(text: str) -> str:
        return text[::-1]

    @workflow.defn(name="bench.ext.flow")
    class Flow:
        def run(self, ctx: Any, text: str) -> Any:
            back = yield ctx.schedule_activity("bench.ext.reverse", [text])
            return hashlib.sha256(back.encode()).hexdigest()

    queue = f"bench-ext-{uuid.uuid4().hex[:6]}"
    client = Client(url, external_storage=LocalFilesystemExternalStorage(root),
                    external_storage_threshold_bytes=threshold)
    worker = Worker(client, task_queue=queue, workflows=[Flow], activities=[reverse], poll_timeout=2.0,
                    pool="threads")
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    texts = _texts(runs, size)
    cpu, wall = _cpu(), time.perf_counter()
    handles = [client.start_workflow("bench.ext.flow", text, task_queue=queue) for text in texts]
    results = [handle.result(timeout=600) for handle in handles]
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    worker.stop()
    thread.join(30)
    assert results == [hashlib.sha256(text[::-1].encode()).hexdigest() for text in texts]
    return {"wall_s": wall, "cpu_ms_per_run": cpu * 1000 / runs}


def _sdk(url: str, root: str, runs: int, size: int, threshold: int) -> Dict[str, float]:
    import asyncio

    from durable_workflow import Client, LocalFilesystemExternalStorage, Worker, activity, workflow

    @activity.defn(name="bench.ext.reverse")
    def reverse(text: str) -> str:
        return text[::-1]

    @workflow.defn(name="bench.ext.flow")
    class Flow:
        def run(self, ctx: Any, text: str) -> Any:
            back = yield ctx.schedule_activity("bench.ext.reverse", [text])
            return hashlib.sha256(back.encode()).hexdigest()

    async def main() -> Dict[str, float]:
        queue = f"bench-ext-{uuid.uuid4().hex[:6]}"
        storage = LocalFilesystemExternalStorage(root)
        client = Client(url, external_storage=storage, external_storage_threshold_bytes=threshold)
        worker = Worker(client, task_queue=queue, workflows=[Flow], activities=[reverse], poll_timeout=2.0,
                        shutdown_timeout=10.0)
        runner = asyncio.create_task(worker.run())
        texts = _texts(runs, size)
        cpu, wall = _cpu(), time.perf_counter()
        handles = [await client.start_workflow(workflow_type="bench.ext.flow", task_queue=queue,
                                               workflow_id=f"wf-{uuid.uuid4().hex}", input=[text])
                   for text in texts]
        results = [await client.get_result(handle, timeout=600) for handle in handles]
        wall, cpu = time.perf_counter() - wall, _cpu() - cpu
        await worker.stop()
        await asyncio.wait_for(runner, timeout=30)
        assert results == [hashlib.sha256(text[::-1].encode()).hexdigest() for text in texts]
        return {"wall_s": wall, "cpu_ms_per_run": cpu * 1000 / runs}

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--size", type=int, default=1024 * 1024)
    parser.add_argument("--threshold", type=int, default=64 * 1024)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--side", choices=["ours", "sdk"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        with tempfile.TemporaryDirectory(prefix="bench-ext-") as root:
            fn = _ours if args.side == "ours" else _sdk
            print(json.dumps(fn(args.url, root, args.runs, args.size, args.threshold)))
        return
    proc, url = _serve()
    figures: Dict[str, List[Dict[str, float]]] = {"ours": [], "sdk": []}
    try:
        for _ in range(args.rounds):
            for side in ("ours", "sdk"):
                out = subprocess.run([sys.executable, __file__, "--side", side, "--url", url, "--runs", str(args.runs),
                                      "--size", str(args.size), "--threshold", str(args.threshold)],
                                     capture_output=True, text=True, check=True, env=dict(os.environ, PYTHONPATH=REPO))
                figures[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"{args.runs} runs x {args.size} bytes (argument and activity result stored; threshold {args.threshold})")
    medians = {}
    for side, rows in figures.items():
        medians[side] = {key: statistics.median(row[key] for row in rows) for key in ("wall_s", "cpu_ms_per_run")}
        per_round = ", ".join(f"{row['cpu_ms_per_run']:.1f}" for row in rows)
        print(f"  {side:4}: wall {medians[side]['wall_s']:.2f} s, CPU {medians[side]['cpu_ms_per_run']:.1f} ms/run "
              f"(rounds: {per_round})")
    print(f"  ours / sdk: wall x{medians['ours']['wall_s'] / medians['sdk']['wall_s']:.2f}, "
          f"CPU per run x{medians['ours']['cpu_ms_per_run'] / medians['sdk']['cpu_ms_per_run']:.2f}")


if __name__ == "__main__":
    main()
