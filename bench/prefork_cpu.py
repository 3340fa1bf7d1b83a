"""CPU-bound activity throughput: ``sync-worker run -P prefork -c 2`` against ``-P threads -c 2``,
and with ``--celery`` our Celery facade's ``-P prefork -c 2`` against real Celery's prefork pool.

    python3 bench/prefork_cpu.py                      # 100 tasks of ~50 ms, 3 rounds
    python3 bench/prefork_cpu.py --tasks 200 --rounds 5 --celery

The task is a fixed pure-Python loop (``prefork_cpu_app.burn``: the GIL is held throughout),
calibrated here to about ``--ms`` milliseconds on one quiet core (the fastest of several
timings), so it is the same amount of work in every process whatever the load. What runs
(every process started here and stopped at the end):

* ``sync-worker devserver`` (its own process, in-memory SQLite);
* per round and kind, one ``sync-worker run prefork_cpu_app:make_worker -P {threads,prefork}
  -c 2`` process, started, waited for (its registrations), given 4 warm-up tasks, measured and
  stopped with SIGTERM; the client here starts N standalone activities at once and reads every
  result (throughput = N / (first start → the moment the last task finished: each task answers
  ``time.time()`` as it ends, so how results are waited for does not count);
* ``--celery``: ``redis-server`` on a free port, ``sync-worker celery -A sync_celery_cpu_app worker
  -P prefork -c 2`` and real Celery 5's ``celery -A celery_cpu_app worker -P prefork -c 2`` (from
  ``/tmp/celery-bench-venv``, created as ``bench/celery_delay.py`` does when missing), each fed by
  ``bench/_cpu_client.py`` (``spin.delay`` x N, then every ``.get()``), rounds alternating.

The median round of each kind is printed with the ratios, and the machine's noise
(``bench/_noise.py``) beside them. The dev server, the client and, in the Celery part, Redis
share the two cores with the workers; the ideal for two processes on two cores is 2x.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path[:0] = [str(BENCH), str(ROOT)]

from _noise import NoiseProbe  # noqa: E402
from celery_delay import ensure_venv, free_port, wait_log, wait_port  # noqa: E402
from prefork_cpu_app import burn  # noqa: E402

from sync_worker.client import Client  # noqa: E402


def calibrate(ms: float) -> int:
    """Loop iterations taking about ``ms`` on one quiet core (the fastest of 7 timings)."""
    probe = 200_000
    timings = []
    for _ in range(7):
        started = time.perf_counter()
        burn(probe)
        timings.append(time.perf_counter() - started)
    return max(1, int(probe * (ms / 1000.0) / min(timings)))


def wait_registered(client: Client, queue: str, count: int, proc: subprocess.Popen, timeout: float = 60) -> None:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = client.list_workers(task_queue=queue).workers
        if sum(1 for w in workers if w.status == "active" and "bench.spin" in w.supported_activity_types) >= count:
            return
        if proc.poll() is not None:
            raise RuntimeError(f"the worker exited ({proc.returncode})")
        time.sleep(0.1)
    raise RuntimeError(f"{count} worker(s) never registered on {queue}")


def native_round(client: Client, url: str, kind: str, tasks: int, iterations: int, index: int,
                 logs: Path) -> Dict[str, float]:
    queue = f"cpu-{kind}-{index}-{os.getpid()}"
    env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL=url,
               PYTHONPATH=os.pathsep.join([str(BENCH), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("SYNC_WORKER_POOL", None)
    with open(logs / f"{kind}-{index}.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "sync_worker", "run", "prefork_cpu_app:make_worker", "-Q", queue,
                                 "-P", kind, "-c", "2", "-l", "WARNING"], cwd=str(BENCH), env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            wait_registered(client, queue, 2 if kind == "prefork" else 1, proc)
            for handle in [client.start_activity("bench.spin", 1000, task_queue=queue) for _ in range(4)]:
                client.get_activity_result(handle, poll_interval=0.02, timeout=120)
            started = time.time()
            handles = [client.start_activity("bench.spin", iterations, task_queue=queue) for _ in range(tasks)]
            finished = max(client.get_activity_result(h, poll_interval=0.1, timeout=600) for h in handles)
            wall = finished - started  # each task answers when it finished: polling adds nothing
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return {"wall_s": wall, "throughput": tasks / wall}


def paired(rounds: Dict[str, List[Dict[str, float]]], top: str, bottom: str) -> str:
    """The ratio within each round (the two ran back to back, under the same load), and their median."""
    ratios = [a["throughput"] / b["throughput"] for a, b in zip(rounds[top], rounds[bottom])]
    listed = ", ".join(f"x{r:.2f}" for r in ratios)
    return f"within each round {listed}: median x{statistics.median(ratios):.2f}"


def median_round(rounds: List[Dict[str, float]]) -> Dict[str, float]:
    ordered = sorted(rounds, key=lambda r: r["throughput"])
    return ordered[len(ordered) // 2]


def celery_part(args: argparse.Namespace, iterations: int, url: str, logs: Path, noise: NoiseProbe,
                procs: List[subprocess.Popen]) -> Dict[str, List[Dict[str, float]]]:  # type: ignore[type-arg]
    celery_python = ensure_venv(Path(args.venv))
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        raise SystemExit("redis-server is not installed (Debian: apt-get install redis-server)")

    def spawn(name: str, argv: List[str], env: Dict[str, str]) -> subprocess.Popen:  # type: ignore[type-arg]
        handle = open(logs / f"{name}.log", "wb")  # noqa: SIM115 - lives as long as the process
        proc = subprocess.Popen(argv, cwd=str(BENCH), env=env, stdout=handle, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    base = dict(os.environ)
    base.pop("SYNC_WORKER_POOL", None)
    redis_port = free_port()
    spawn("redis", [redis_server, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
          base)
    wait_port(redis_port)
    theirs = dict(base, BENCH_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0", PYTHONPATH=str(BENCH))
    ours = dict(base, DURABLE_WORKFLOW_SERVER_URL=url, PYTHONPATH=os.pathsep.join(
        [str(BENCH), str(ROOT), str(ROOT / "integrations" / "celery"), base.get("PYTHONPATH", "")]))
    mine = spawn("sync-worker-celery", [sys.executable, "-m", "sync_worker", "celery", "-A", "sync_celery_cpu_app",
                                        "worker", "-Q", "bench", "-c", "2", "-P", "prefork", "-l", "info"], ours)
    wait_log(logs / "sync-worker-celery.log", "running on task queue", mine)
    real = spawn("celery", [str(Path(args.venv) / "bin" / "celery"), "-A", "celery_cpu_app", "worker", "-Q", "bench",
                            "-c", "2", "-P", "prefork", "-l", "info"], theirs)
    wait_log(logs / "celery.log", "ready.", real)
    rounds: Dict[str, List[Dict[str, float]]] = {"sync_worker_celery prefork": [], "celery prefork": []}
    for index in range(args.rounds):
        for name, python, app, env in (("sync_worker_celery prefork", sys.executable, "sync_celery_cpu_app", ours),
                                       ("celery prefork", str(celery_python), "celery_cpu_app", theirs)):
            noise.sample()
            out = subprocess.run([python, str(BENCH / "_cpu_client.py"), "--app", app, "--tasks", str(args.tasks),
                                  "--iterations", str(iterations)], cwd=str(BENCH), env=env, capture_output=True,
                                 text=True, timeout=1800)
            if out.returncode != 0:
                raise RuntimeError(f"{app} client failed: {out.stderr[-3000:]}")
            rounds[name].append(dict(json.loads(out.stdout.strip().splitlines()[-1])))
            sys.stderr.write(f"round {index + 1}: {name} {rounds[name][-1]['throughput']:.1f} tasks/s\n")
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ms", type=float, default=50.0, help="CPU milliseconds per task on a quiet core")
    parser.add_argument("--iterations", type=int, default=None, help="loop iterations per task (default: calibrated)")
    parser.add_argument("--celery", action="store_true", help="also real Celery's prefork pool (needs redis-server)")
    parser.add_argument("--venv", default="/tmp/celery-bench-venv")
    args = parser.parse_args()
    iterations = args.iterations or calibrate(args.ms)
    logs = Path(os.environ.get("TMPDIR", "/tmp")) / f"prefork-bench-{os.getpid()}"
    logs.mkdir(parents=True, exist_ok=True)
    noise = NoiseProbe()
    procs: List[subprocess.Popen[Any]] = []
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    with open(logs / "devserver.log", "wb") as log:
        procs.append(subprocess.Popen([sys.executable, "-m", "sync_worker", "devserver", "--port", str(port)],
                                      cwd=str(ROOT), env=env, stdout=log, stderr=subprocess.STDOUT))
    url = f"http://127.0.0.1:{port}"
    client = Client(url)
    try:
        wait_port(port)
        rounds: Dict[str, List[Dict[str, float]]] = {"threads": [], "prefork": []}
        for index in range(args.rounds):
            for kind in ("threads", "prefork"):
                noise.sample()
                rounds[kind].append(native_round(client, url, kind, args.tasks, iterations, index, logs))
                sys.stderr.write(f"round {index + 1}: {kind} {rounds[kind][-1]['throughput']:.1f} tasks/s\n")
        if args.celery:
            rounds.update(celery_part(args, iterations, url, logs, noise, procs))
        noise.sample()
    finally:
        client.close()
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    medians = {kind: median_round(r) for kind, r in rounds.items()}
    print(f"CPU-bound activities: {args.tasks} tasks x {iterations} loop iterations (~{args.ms:g} ms on a quiet core), "
          f"-c 2 on {os.cpu_count()} CPU(s), {args.rounds} round(s), median round:")
    for kind, figures in medians.items():
        spread = ", ".join(f"{r['throughput']:.1f}" for r in rounds[kind])
        print(f"  {kind:28s} {figures['throughput']:7.1f} tasks/s  (rounds: {spread})")
    ratio = medians["prefork"]["throughput"] / medians["threads"]["throughput"]
    print(f"  prefork / threads: x{ratio:.2f} (target >= 1.7); {paired(rounds, 'prefork', 'threads')}")
    if "celery prefork" in medians:
        facade = medians["sync_worker_celery prefork"]["throughput"] / medians["celery prefork"]["throughput"]
        native = medians["prefork"]["throughput"] / medians["celery prefork"]["throughput"]
        print(f"  sync_worker_celery prefork / celery prefork: x{facade:.2f} (target >= 0.9); "
              f"{paired(rounds, 'sync_worker_celery prefork', 'celery prefork')}")
        print(f"  sync-worker run prefork / celery prefork: x{native:.2f} (different rounds: less comparable)")
    print(noise.report())
    print(f"logs: {logs}")


if __name__ == "__main__":
    main()
