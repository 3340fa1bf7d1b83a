"""Web request latency with and without an embedded worker busy with 50 concurrent I/O activities.

    python3 bench/embed_latency.py                    # gunicorn sync, gthread, gevent and uWSGI
    python3 bench/embed_latency.py --classes gevent --requests 2000

For each server: one web worker process (gunicorn ``-w 1``; uWSGI ``processes = 1``), serving a
small HTML page. First *without* the embedded worker (no hooks), then *with* it: 50 activity
slots, kept full by 200 queued standalone activities of 2 s each that wait on I/O (0.2 s sleeps,
one heartbeat HTTP call per sleep). The client (this process, 2 threads, keep-alive off) sends
``--requests`` GETs in each phase and prints p50/p99 of the request latency side by side, with the
p99 ratio and how many activities the embedded worker completed while it was measured. The dev
server runs as its own child process (``sync-worker devserver``). Nothing is asserted: the figures
depend on the machine (and on what else shares its cores).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SLOTS = 50
ACTIVITIES = 200
ACTIVITY_SECONDS = 2.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_http(url: str, timeout: float, proc: Optional[subprocess.Popen[bytes]] = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode} before {url} answered")
        if time.monotonic() > deadline:
            raise SystemExit(f"{url} did not answer within {timeout:.0f} s")
        time.sleep(0.1)


def server_argv(kind: str, port: int) -> List[str]:
    if kind == "uwsgi":
        uwsgi = Path(sys.executable).parent / "uwsgi"
        return [str(uwsgi if uwsgi.exists() else "uwsgi"), "--master", "--processes", "1", "--http-socket",
                f"127.0.0.1:{port}", "--module", "bench.embed_uwsgi_app", "--need-app", "--die-on-term",
                "--disable-logging", "--enable-threads"]
    argv = [sys.executable, "-m", "gunicorn", "-c", str(BENCH / "embed_gunicorn_conf.py"), "-k", kind, "-w", "1",
            "-b", f"127.0.0.1:{port}", "--log-level", "warning", "bench.embed_app:application"]
    if kind == "gthread":
        argv[-1:-1] = ["--threads", "4"]
    return argv


def measure(url: str, requests: int) -> List[float]:
    def one(_: int) -> float:
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=30) as response:
            response.read()
        return (time.perf_counter() - started) * 1000.0

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(requests)))


def percentiles(samples: List[float]) -> Tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples), cuts[98]


def phase(kind: str, server_url: str, with_worker: bool, requests: int, log: Path) -> Tuple[float, float, int, int]:
    from sync_worker.client import Client

    queue = f"bench-embed-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
               BENCH_QUEUE=queue, DURABLE_WORKFLOW_SERVER_URL=server_url)
    env.pop("SYNC_WORKER_FACTORY", None)
    env.pop("BENCH_EMBED", None)
    if with_worker:
        env.update(SYNC_WORKER_FACTORY="bench.embed_app:build", SYNC_WORKER_CONCURRENCY=str(SLOTS), BENCH_EMBED="1")
    with open(log, "ab") as out:
        proc = subprocess.Popen(server_argv(kind, port), cwd=str(ROOT), env=env, stdout=out, stderr=out,
                                start_new_session=True)
    client = Client(server_url)
    try:
        wait_http(f"http://127.0.0.1:{port}/", 60, proc)
        ids: List[str] = []
        done_before = running = 0
        if with_worker:
            wait_http(f"http://127.0.0.1:{port}/readyz", 30, proc)
            ids = [client.start_activity("bench.embed.io", ACTIVITY_SECONDS, task_queue=queue,
                                         start_to_close_timeout_seconds=120).activity_id for _ in range(ACTIVITIES)]
            time.sleep(1.5)  # every slot busy before measuring
            done_before, running = states(client, ids)
        measure(f"http://127.0.0.1:{port}/", 50)  # warm-up
        samples = measure(f"http://127.0.0.1:{port}/", requests)
        done = states(client, ids)[0] - done_before if with_worker else 0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        client.close()
    p50, p99 = percentiles(samples)
    return p50, p99, done, running


def states(client: object, ids: List[str]) -> Tuple[int, int]:
    """(completed, running) among the activities ``ids``: one listing, one snapshot of the server."""
    wanted = set(ids)
    done = running = 0
    token: Optional[str] = None
    while True:
        page = client.list_activities(page_size=500, next_page_token=token)  # type: ignore[attr-defined]
        for record in page.activities:
            if record.activity_id in wanted:
                state = str(record.activity_status or record.status or "")
                done += state == "completed"
                running += state == "running"
        token = page.next_page_token
        if not token:
            return done, running


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classes", default="sync,gthread,gevent,uwsgi",
                        help="comma-separated: gunicorn worker classes and/or uwsgi")
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    kinds = [k.strip() for k in args.classes.split(",") if k.strip()]
    log = Path(tempfile.mkdtemp(prefix="bench-embed-")) / "servers.log"
    dev_port = free_port()
    devserver = subprocess.Popen([sys.executable, "-m", "sync_worker", "devserver", "--port", str(dev_port),
                                  "--log-level", "WARNING"], cwd=str(ROOT), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
    server_url = f"http://127.0.0.1:{dev_port}"
    try:
        wait_http(f"{server_url}/api/cluster/info", 30, devserver)
        print(f"web latency, 1 web worker process, {args.requests} GETs from 2 client threads per phase; "
              f"'with': the embedded worker runs {SLOTS} concurrent I/O activities ({ACTIVITY_SECONDS:.0f} s each)")
        print(f"{'server':<16} {'without p50':>11} {'p99':>8} {'with p50':>9} {'p99':>8} {'p99 ratio':>9}  "
              "activities running at the start / completed while measured")
        for kind in kinds:
            base50, base99, _, _ = phase(kind, server_url, False, args.requests, log)
            with50, with99, done, running = phase(kind, server_url, True, args.requests, log)
            name = kind if kind == "uwsgi" else f"gunicorn {kind}"
            print(f"{name:<16} {base50:>9.2f}ms {base99:>6.2f}ms {with50:>7.2f}ms {with99:>6.2f}ms "
                  f"{with99 / base99:>8.1f}x  {running} / {done}", flush=True)
    finally:
        devserver.send_signal(signal.SIGTERM)
        devserver.wait(30)
    print(f"(server logs: {log})")


if __name__ == "__main__":
    main()
