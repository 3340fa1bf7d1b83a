"""1,000 ``.delay()`` no-op tasks → results: ``sync_worker_celery`` on the dev server beside real
Celery 5 with a Redis broker and result backend, on the same machine, printed side by side.

    python3 bench/celery_delay.py                       # 1,000 tasks, 8 threads per worker, 3 rounds
    python3 bench/celery_delay.py --tasks 2000 --concurrency 16 --rounds 1
    python3 bench/celery_delay.py --publish-only        # the publishes alone: no worker on either side
    python3 bench/celery_delay.py --devserver-cpu none  # the dev server free to run on every core

What runs (every process started here and stopped at the end):

* ours: ``sync-worker devserver`` (its own process, in-memory SQLite; ``--cpu auto``, its default:
  pinned to the core it starts on, see ``sync_worker/devserver/affinity.py``) and one
  ``sync-worker celery -A sync_celery_noop_app worker -Q bench -c N`` process (threads);
* Celery: ``redis-server`` on a free port (``--save ''``), and ``celery -A celery_noop_app worker
  -Q bench -c N -P threads`` from a venv at ``/tmp/celery-bench-venv`` that this script creates
  with ``pip install 'celery[redis]>=5.3,<6'`` when it is missing (``--venv`` to use another);
* the CPU of each side's server (the dev server; ``redis-server``) and worker process over each
  client's run, per task started (``/proc``);
* the client of each side in its own process (``bench/_delay_client.py``): 20 warm-up tasks, then
  N ``noop.delay(time.time())`` calls, then ``.get()`` of each result in order; the client's own
  CPU time over the N calls is printed per call (what a web process pays to enqueue), with the
  machine's noise (``bench/_noise.py``).

Both apps are the same module (``celery_noop_app.py``; ``sync_celery_noop_app.py`` differs only in
its import). Latency = when the task body ran minus when ``.delay()`` was called; throughput =
N / (first ``.delay()`` → last result read). Rounds alternate between the systems; the median
round is printed. The durable side records every task in the server's history (SQLite, one
transaction per step); Celery with Redis keeps messages and results in memory. Figures are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


#: Tasks each client runs before the timed ones (``_delay_client.py --warmup``'s default).
WARMUP = 20


def cpu_seconds(proc: subprocess.Popen[bytes]) -> float:
    """The process's CPU time (user + system) so far, from ``/proc``."""
    with open(f"/proc/{proc.pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


def ensure_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if (venv / "bin" / "celery").exists():
        return python
    sys.stderr.write(f"creating {venv} with real Celery (pip install 'celery[redis]>=5.3,<6')...\n")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "celery[redis]>=5.3,<6"], check=True)
    return python


def wait_log(path: Path, text: str, proc: subprocess.Popen, timeout: float = 60) -> None:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited: {path.read_text(errors='replace')[-2000:]}")
        time.sleep(0.1)
    raise RuntimeError(f"{text!r} not seen in {path}")


def client(python: str, app: str, env: Dict[str, str], tasks: int, publish_only: bool = False) -> Dict[str, float]:
    extra = ["--publish-only", "--warmup", "0"] if publish_only else []
    out = subprocess.run([python, str(BENCH / "_delay_client.py"), "--app", app, "--tasks", str(tasks), *extra],
                         cwd=str(BENCH), env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{app} client failed: {out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--venv", default="/tmp/celery-bench-venv")
    parser.add_argument("--devserver-cpu", default="auto",
                        help="the dev server's --cpu (auto: its default, one core; none: every core)")
    parser.add_argument("--publish-only", action="store_true",
                        help="start no worker on either side: time the publishes alone (no results read)")
    args = parser.parse_args()
    celery_python = ensure_venv(Path(args.venv))
    sys.path.insert(0, str(BENCH))
    from _noise import NoiseProbe

    noise = NoiseProbe()
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        raise SystemExit("redis-server is not installed (Debian: apt-get install redis-server)")
    logs = Path(os.environ.get("TMPDIR", "/tmp")) / f"celery-bench-{os.getpid()}"
    logs.mkdir(parents=True, exist_ok=True)
    procs: List[subprocess.Popen] = []  # type: ignore[type-arg]

    def spawn(name: str, argv: List[str], env: Dict[str, str]) -> subprocess.Popen:  # type: ignore[type-arg]
        handle = open(logs / f"{name}.log", "wb")  # noqa: SIM115 - lives as long as the process
        proc = subprocess.Popen(argv, cwd=str(BENCH), env=env, stdout=handle, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    base = dict(os.environ)
    base.pop("SYNC_WORKER_POOL", None)
    ours = dict(base, PYTHONPATH=os.pathsep.join([str(BENCH), str(ROOT), str(ROOT / "integrations" / "celery"),
                                                  base.get("PYTHONPATH", "")]))
    try:
        redis_port, dev_port = free_port(), free_port()
        redis_proc = spawn("redis", [redis_server, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                        "--appendonly", "no"], base)
        wait_port(redis_port)
        theirs = dict(base, BENCH_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0", PYTHONPATH=str(BENCH))
        dev_proc = spawn("devserver", [sys.executable, "-m", "sync_worker", "devserver", "--port", str(dev_port),
                                       "--cpu", args.devserver_cpu], ours)
        wait_port(dev_port)
        ours["DURABLE_WORKFLOW_SERVER_URL"] = f"http://127.0.0.1:{dev_port}"
        if not args.publish_only:
            mine = spawn("sync-worker", [sys.executable, "-m", "sync_worker", "celery", "-A",
                                         "sync_celery_noop_app", "worker", "-Q", "bench", "-c", str(args.concurrency),
                                         "-l", "info"], ours)
            wait_log(logs / "sync-worker.log", "running on task queue", mine)
            real = spawn("celery", [str(Path(args.venv) / "bin" / "celery"), "-A", "celery_noop_app", "worker",
                                    "-Q", "bench", "-c", str(args.concurrency), "-P", "threads", "-l", "info"], theirs)
            wait_log(logs / "celery.log", "ready.", real)
        rounds: Dict[str, List[Dict[str, float]]] = {"sync_worker_celery": [], "celery": []}
        sides = {"sync_worker_celery": (sys.executable, "sync_celery_noop_app", ours, dev_proc,
                                        None if args.publish_only else mine),
                 "celery": (str(celery_python), "celery_noop_app", theirs, redis_proc,
                            None if args.publish_only else real)}
        for index in range(args.rounds):
            noise.sample()
            for system, (python, app, env, server, worker) in sides.items():
                before = (cpu_seconds(server), cpu_seconds(worker) if worker is not None else 0.0)
                got = client(python, app, env, args.tasks, args.publish_only)
                ran = args.tasks + (0 if args.publish_only else WARMUP)  # every task this client started
                got["server_cpu_ms"] = 1000.0 * (cpu_seconds(server) - before[0]) / ran
                if worker is not None:
                    got["worker_cpu_ms"] = 1000.0 * (cpu_seconds(worker) - before[1]) / ran
                rounds[system].append(got)
            mine_round, theirs_round = rounds["sync_worker_celery"][-1], rounds["celery"][-1]
            sys.stderr.write(f"round {index + 1}: ours {mine_round['publish_s']:.2f} s publish, "
                             f"{mine_round.get('throughput', 0):.0f}/s; celery {theirs_round['publish_s']:.2f} s, "
                             f"{theirs_round.get('throughput', 0):.0f}/s\n")
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()

    def median(system: str, key: str) -> float:
        return statistics.median(r[key] for r in rounds[system])

    noise.sample()
    if args.publish_only:
        print(f"{args.tasks} .delay() no-op tasks published, no worker on either side, median of {args.rounds} rounds")
    else:
        print(f"{args.tasks} .delay() no-op tasks -> results, {args.concurrency} worker threads, "
              f"median of {args.rounds} rounds")
    print(f"dev server --cpu {args.devserver_cpu}")
    print(noise.report())
    print(f"{'':28}{'sync_worker_celery':>20}{'celery 5 + redis':>20}{'ratio':>10}")
    rows = (("throughput", "throughput", "tasks/s"), ("p50_ms", "latency p50", "ms"), ("p99_ms", "latency p99", "ms"),
            ("publish_s", f"publish {args.tasks:,} delay()", "s"), ("publish_cpu_ms", "client CPU per delay()", "ms"),
            ("server_cpu_ms", "server CPU per task", "ms"), ("worker_cpu_ms", "worker CPU per task", "ms"))
    for key, label, unit in rows[3:6] if args.publish_only else rows:
        ours_value, theirs_value = median("sync_worker_celery", key), median("celery", key)
        ratio = ours_value / theirs_value if theirs_value else float("nan")
        digits = {"publish_cpu_ms": 3, "publish_s": 2, "server_cpu_ms": 3, "worker_cpu_ms": 3}.get(key, 1)
        print(f"{label + ' (' + unit + ')':28}{ours_value:>20.{digits}f}{theirs_value:>20.{digits}f}{ratio:>9.2f}x")


if __name__ == "__main__":
    main()
