"""The client's cost per serial workflow: ``start_workflow`` then ``handle.result()``, as the serial chain calls them.

The chain's client (``bench/latency_trace.py``, ``devserver_targets.py --parts latency``) shares a core
with the worker, so its CPU between the start's answer and sending its history wait delays the
worker's first workflow task. This bench measures that client alone: a fake server (a child process,
one ``selectors`` loop) replays the dev server's own answers, byte for byte, to the two requests a
serial workflow makes (``POST /api/workflows`` and the result's ``GET .../history?wait_new_event=1``,
answered with the closed run's history, as the dev server answers it in the chain). The answers are
captured first from a real ``DevServer`` with our worker completing one one-activity workflow.

    python3 bench/client_instructions.py                      # instructions per workflow (valgrind)
    python3 bench/client_instructions.py --tree /tmp/before   # the same for another tree
    python3 bench/client_instructions.py --cpu --rounds 5 --baseline /tmp/before   # CPU per workflow, interleaved
    python3 bench/client_instructions.py --profile            # cProfile of the client loop (this tree)

Instructions: the client process runs ``--small`` then ``--large`` workflows under ``valgrind
--tool=cachegrind`` (the fake server is a child valgrind does not follow); the difference over the
extra workflows is the client's user-space instructions per workflow, start-up cancelled out. Kernel
work (system calls) is not in it: ``--cpu`` measures process CPU time (user + system) per workflow
over ``--large`` workflows, rounds of this tree and the baseline interleaved. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


# -- capture (this tree, a real dev server and worker) ------------------------------------------


def _raw(port: int, method: str, target: str, body: Optional[bytes] = None) -> bytes:
    """One request on a fresh socket; the whole response (head and body) as the server sent it."""
    head = (f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\n"
            "Content-Type: application/json\r\nX-Namespace: default\r\n"
            "X-Durable-Workflow-Control-Plane-Version: 2\r\n")
    data = head.encode() + (b"Content-Length: %d\r\n\r\n" % len(body) + body if body is not None else b"\r\n")
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(data)
        received = b""
        while True:
            end = received.find(b"\r\n\r\n")
            if end >= 0:
                found = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", received[:end])
                if found and len(received) >= end + 4 + int(found.group(1)):
                    return received[:end + 4 + int(found.group(1))]
            piece = sock.recv(65536)
            if not piece:
                return received
            received += piece


def capture() -> Dict[str, str]:
    sys.path.insert(0, REPO)
    sys.path.insert(0, HERE)
    import devserver_throughput as bench

    from sync_worker import Client, payloads
    from sync_worker.devserver import DevServer

    with DevServer(port=0, db=":memory:") as server:
        worker = subprocess.Popen([sys.executable, bench.__file__, "_worker", "threads", server.url, "1"],
                                  env=dict(os.environ, PYTHONPATH=REPO))
        try:
            client = Client(server.url)
            client.start_workflow(bench.FLOW_TYPE, task_queue=bench.QUEUE, workflow_id="capture-0").result(timeout=30)
            body = json.dumps({"workflow_id": "capture-1", "workflow_type": bench.FLOW_TYPE,
                               "task_queue": bench.QUEUE, "input": payloads.envelope([]),
                               "execution_timeout_seconds": 3600, "run_timeout_seconds": 600})
            start = _raw(server.port, "POST", "/api/workflows", body.encode())
            run_id = json.loads(start.split(b"\r\n\r\n", 1)[1])["run_id"]
            client.get_result("capture-1", timeout=30)
            history = _raw(server.port, "GET", f"/api/workflows/capture-1/runs/{run_id}/history"
                           "?wait_new_event=1&page_size=1000")
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
    return {"start": start.decode("latin-1"), "history": history.decode("latin-1")}


# -- the fake server (a child process) ----------------------------------------------------------


def serve(shapes_path: str) -> None:
    with open(shapes_path) as handle:
        shapes = json.load(handle)
    start, history = shapes["start"].encode("latin-1"), shapes["history"].encode("latin-1")
    missing = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    selector = selectors.DefaultSelector()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    selector.register(listener, selectors.EVENT_READ, None)
    buffers: Dict[socket.socket, bytearray] = {}
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    while not stop.is_set():
        for key, _ in selector.select(0.2):
            if key.data is None:
                conn, _ = listener.accept()
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                buffers[conn] = bytearray()
                selector.register(conn, selectors.EVENT_READ, "conn")
                continue
            conn = key.fileobj  # type: ignore[assignment]
            data = conn.recv(65536)
            if not data:
                selector.unregister(conn)
                buffers.pop(conn).clear()
                conn.close()
                continue
            buffer = buffers[conn]
            buffer += data
            while True:
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    break
                head = bytes(buffer[:end])
                found = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
                total = end + 4 + (int(found.group(1)) if found else 0)
                if len(buffer) < total:
                    break
                del buffer[:total]
                line = head.split(b"\r\n", 1)[0]
                path = line.split(b" ")[1].split(b"?")[0]
                answer = start if line.startswith(b"POST") and path == b"/api/workflows" else (
                    history if path.endswith(b"/history") else missing)
                conn.sendall(answer)


# -- the client (the measured process) ----------------------------------------------------------


def client_loop(tree: str, shapes_path: str, count: int, mode: str) -> None:
    sys.path.insert(0, tree)
    server = subprocess.Popen([sys.executable, __file__, "_serve", shapes_path], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline().split()[1])
    from sync_worker import Client

    client = Client(f"http://127.0.0.1:{port}")
    flow = "bench.one_activity"

    def one(n: int) -> None:
        handle = client.start_workflow(flow, task_queue="bench", workflow_id=f"lat-{n}")
        handle.result(poll_interval=0.001, timeout=30)

    try:
        for n in range(20):  # warm: connection, caches
            one(n)
        if mode == "profile":
            import cProfile
            import pstats

            profile = cProfile.Profile(time.process_time)
            profile.enable()
            for n in range(count):
                one(n)
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(70)
            return
        cpu = _cpu()
        for n in range(count):
            one(n)
        if mode == "cpu":
            print(f"CPU {(_cpu() - cpu) / count * 1e6:.2f}", flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _instructions(tree: str, shapes_path: str, count: int) -> int:
    out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                          sys.executable, __file__, "_client", tree, shapes_path, str(count), "count"],
                         capture_output=True, text=True, timeout=3600)
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{out.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _cpu_run(tree: str, shapes_path: str, count: int) -> float:
    out = subprocess.run([sys.executable, __file__, "_client", tree, shapes_path, str(count), "cpu"],
                         capture_output=True, text=True, timeout=3600, check=True)
    return float(out.stdout.split("CPU", 1)[1].split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=REPO, help="the source tree whose sync_worker is measured")
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--large", type=int, default=1200)
    parser.add_argument("--cpu", action="store_true", help="CPU time per workflow instead of instructions")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", default="", help="with --cpu: another tree, its rounds interleaved")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(capture(), handle)
        shapes_path = handle.name
    try:
        if args.profile:
            subprocess.run([sys.executable, __file__, "_client", args.tree, shapes_path, str(args.large), "profile"],
                           check=True)
        elif args.cpu:
            trees = [("this", args.tree)] + ([("baseline", args.baseline)] if args.baseline else [])
            found: Dict[str, List[float]] = {name: [] for name, _ in trees}
            for _ in range(args.rounds):
                for name, tree in trees:
                    found[name].append(_cpu_run(tree, shapes_path, args.large))
            print(f"client CPU per serial workflow (start + result), us, {args.large} workflows a round")
            for name, tree in trees:
                values = found[name]
                print(f"  {name:8s} {os.path.abspath(tree)}: median {statistics.median(values):7.1f} "
                      f"({min(values):.1f}..{max(values):.1f})")
            if args.baseline:
                print("  this / baseline per round: " + " ".join(
                    f"x{a / b:.2f}" for a, b in zip(found["this"], found["baseline"])))
        else:
            if shutil.which("valgrind") is None:
                sys.exit("valgrind is not installed")
            small = _instructions(args.tree, shapes_path, args.small)
            large = _instructions(args.tree, shapes_path, args.large)
            print(f"tree {os.path.abspath(args.tree)}: client user-space instructions per serial workflow "
                  f"({args.large} - {args.small}): {(large - small) / (args.large - args.small):,.0f}")
    finally:
        os.unlink(shapes_path)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_serve":
        serve(sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "_client":
        client_loop(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        main()
