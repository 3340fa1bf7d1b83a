"""Control-plane call latency: ``sync_worker.Client`` beside the published ``durable_workflow.sync.Client``.

Both clients call the same embedded dev server (its own child process, so its CPU is not
counted): N ``describe_workflow``, N ``signal_workflow`` and N ``list_workflows`` calls each,
one after the other from one thread, then the same again from 8 threads sharing one client
(the published sync facade runs one event loop per client, so it is driven from one thread
only). Prints calls/s, p50/p99 and our/SDK ratios; asserts nothing.

    python3 bench/client_calls.py            # N=300
    python3 bench/client_calls.py --calls 50
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve() -> Tuple[subprocess.Popen, str]:  # type: ignore[type-arg]
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "sync_worker.cli", "devserver", "--port", str(port), "--db",
                             ":memory:"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONPATH=REPO))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the dev server did not start")


def _timed(calls: int, fn: Callable[[int], Any]) -> List[float]:
    out = []
    for i in range(calls):
        started = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - started)
    return out


def _summary(samples: List[float]) -> Dict[str, float]:
    ordered = sorted(samples)
    return {"per_s": len(samples) / sum(samples), "p50_ms": statistics.median(ordered) * 1000,
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000}


def _scenario(client: Any, prefix: str, calls: int) -> Dict[str, Dict[str, float]]:
    wid = f"{prefix}-bench"
    client.start_workflow(workflow_type="bench.wait", task_queue="bench", workflow_id=wid, input=[])
    return {
        "describe_workflow": _summary(_timed(calls, lambda i: client.describe_workflow(wid))),
        "signal_workflow": _summary(_timed(calls, lambda i: client.signal_workflow(wid, "poke", args=[i]))),
        "list_workflows": _summary(_timed(calls, lambda i: client.list_workflows(page_size=20))),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    from durable_workflow.sync import Client as SdkClient

    from sync_worker.client import Client

    proc, url = _serve()
    try:
        with Client(url) as ours, SdkClient(url) as sdk:
            for client in (ours, sdk):  # warm both (connection, discovery)
                client.health()
            results = {"sync_worker": _scenario(ours, "ours", args.calls), "sdk": _scenario(sdk, "sdk", args.calls)}
            wid = "ours-bench"
            started = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda i: ours.describe_workflow(wid), range(args.calls * 4)))
            threaded = args.calls * 4 / (time.perf_counter() - started)
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"control-plane calls against the dev server, {args.calls} of each, one thread")
    for name in ("describe_workflow", "signal_workflow", "list_workflows"):
        a, b = results["sync_worker"][name], results["sdk"][name]
        print(f"  {name:18s} sync_worker {a['per_s']:7.0f}/s p50 {a['p50_ms']:5.2f} ms p99 {a['p99_ms']:5.2f} ms | "
              f"sdk {b['per_s']:7.0f}/s p50 {b['p50_ms']:5.2f} ms p99 {b['p99_ms']:5.2f} ms | "
              f"throughput ratio {a['per_s'] / b['per_s']:.2f}x")
    print(f"  describe_workflow from 8 threads on one sync_worker Client: {threaded:.0f}/s "
          "(the SDK's sync facade is one event loop per client)")


if __name__ == "__main__":
    main()
