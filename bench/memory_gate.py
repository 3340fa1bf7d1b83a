"""The memory admission gate: the OOM scenario, and the gate's CPU cost per task.

Run from the repository root, as root on Linux (part (a) creates memory cgroups)::

    python3 bench/memory_gate.py                     # both parts, both pools (about 4 minutes)
    python3 bench/memory_gate.py --part oom --pools threads
    python3 bench/memory_gate.py --part cpu --tasks 2000

(a) ``--part oom``: 16 standalone activities, each allocating and touching 200 MB and holding it
0.5 s, run by ONE ``sync-worker run`` process inside a fresh cgroup limited to 700 MB, with 8
activity slots: fixed ``-c 8``; adaptive ``--autoscale 8`` (limit starts at 1 and grows); adaptive
``{"max": 8, "start": 8}`` (8 slots open from the start: only the gate holds it back). Printed per
run: wall time (worker start → last completion, or the kill), completed activities, whether the
kernel OOM-killed it, the cgroup's peak charge, memory deferrals and the final limit.

(b) ``--part cpu``: N no-op activities on a worker with 10 slots, interleaved rounds of: fixed
``-c 10``; the gate on with the limit pinned at 10 (``{"min": 10, "max": 10}``: the gate's own
cost); adaptive ``{"max": 10, "start": 10}`` (gate plus controller: for no-op tasks the gradient
shrinks the limit, which changes the run itself). The worker's user+sys CPU (``/proc/<pid>/stat``)
is read once it is idle and registered (each run on a fresh dev server, the order of the modes
alternating between rounds) and again after the last task completed. Printed: the
median CPU per task of each mode and its difference to fixed. Whole-process CPU on a shared
machine is noisy (the fixed rounds alone spread by 10-20 % here), so it also prints the gate's own
bookkeeping per task measured in-process (reserve + start + finish with the real memory readers and
one other task running, fixed vs gated) as a share of the fixed worker's CPU per task: the precise figure (target < 5%).

The dev server runs in this driver process, so its CPU is never counted as the worker's.
Figures are printed, never asserted: they depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from sync_worker.client import Client  # noqa: E402
from sync_worker.devserver import DevServer  # noqa: E402
from sync_worker.runtime.admission import AdmissionGate, resolve_concurrency  # noqa: E402
from tests.cgroup._cgroup import unavailable_reason  # noqa: E402
from tests.cgroup._scenario import run_scenario  # noqa: E402

MIB = 1024 * 1024
OOM_MODES: List[Tuple[str, List[str], Optional[str]]] = [
    ("fixed -c 8", ["-c", "8"], None),
    ("adaptive --autoscale 8", ["--autoscale", "8"], None),
    ("adaptive start=8 max=8", [], '{"max": 8, "start": 8}'),
]


def part_oom(url: str, pools: List[str], limit_mb: int, tasks: int, megabytes: int) -> None:
    reason = unavailable_reason()
    if reason is not None:
        print(f"(a) skipped: {reason}")
        return
    print(f"(a) {tasks} activities x {megabytes} MB (touched, held 0.5 s), 8 slots, cgroup limit {limit_mb} MB")
    print(f"    {'pool':8} {'mode':26} {'wall s':>7} {'done':>5} {'OOM-killed':>10} {'peak MB':>8} "
          f"{'deferrals':>9} {'limit':>5}")
    for pool in pools:
        for label, args, spec in OOM_MODES:
            outcome = run_scenario(url, args, pool=pool, limit_mb=limit_mb, tasks=tasks, megabytes=megabytes,
                                   timeout=120.0, concurrency_json=spec)
            peak = f"{outcome.peak_bytes / MIB:.0f}" if outcome.peak_bytes else "?"
            limit = outcome.status.get("concurrency", {}).get("limit", "-")
            deferrals = outcome.deferrals if outcome.status else "-"
            print(f"    {pool:8} {label:26} {outcome.wall_seconds:7.1f} {outcome.completed:5d} "
                  f"{'yes' if outcome.oom_killed else 'no':>10} {peak:>8} {deferrals!s:>9} {limit!s:>5}",
                  flush=True)


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def _cpu_round(url: str, pool: str, spec: Optional[str], tasks: int) -> float:
    client = Client(url)
    queue = f"memgate-cpu-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, SW_MEMGATE_CONCURRENCY=spec or "", SW_MEMGATE_STATUS_FILE="",
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p))
    args = [] if spec else ["-c", "10"]
    process = subprocess.Popen([sys.executable, "-m", "sync_worker", "run", "tests.cgroup._memory_hungry:build",
                                "-Q", queue, "--server-url", url, "-P", pool, "-l", "WARNING", *args],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not any(r.get("status") == "active" for r in client.list_workers(task_queue=queue)["workers"]):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("worker did not register")
            time.sleep(0.1)
        time.sleep(1.0)
        before = _cpu_seconds(process.pid)
        ids = [client.start_activity("cg.noop", task_queue=queue)["activity_id"] for _ in range(tasks)]
        for activity_id in ids:
            client.get_activity_result(activity_id, timeout=120)
        after = _cpu_seconds(process.pid)
        return (after - before) / tasks
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        client.close()


def _median(values: List[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def gate_bookkeeping_seconds(option: object, cycles: int = 20000) -> float:
    """CPU seconds per task of the gate's own work: reserve, start, finish, real memory readers,
    with one other task running (so an adaptive gate makes its projection, as in a busy worker)."""
    gate = AdmissionGate(resolve_concurrency(option))  # type: ignore[arg-type]
    for name in ("bench.warmup", None):  # one solo run teaches a cost; then one stays running
        other = gate.try_reserve()
        assert other is not None
        other.start("bench.noop")
        if name:
            other.finish(True)
    started = time.process_time()
    for _ in range(cycles):
        reservation = gate.try_reserve()
        assert reservation is not None
        reservation.start("bench.noop")
        reservation.finish(True)
    return (time.process_time() - started) / cycles


CPU_MODES: List[Tuple[str, Optional[str]]] = [
    ("fixed -c 10", None),
    ("gate on, limit pinned at 10", '{"min": 10, "max": 10}'),
    ("adaptive start=10 max=10", '{"max": 10, "start": 10}'),
]


def part_cpu(pools: List[str], tasks: int, rounds: int) -> None:
    print(f"(b) {tasks} no-op activities, 10 slots, {rounds} interleaved rounds per mode (order alternating, "
          "a fresh dev server per run): worker CPU per task")
    for pool in pools:
        samples: Dict[str, List[float]] = {label: [] for label, _ in CPU_MODES}
        for round_number in range(rounds):
            order = CPU_MODES if round_number % 2 == 0 else list(reversed(CPU_MODES))
            for label, spec in order:
                with DevServer(port=0, db=":memory:") as server:
                    samples[label].append(_cpu_round(server.url, pool, spec, tasks))
        fixed = _median(samples[CPU_MODES[0][0]])
        for label, _ in CPU_MODES:
            value = _median(samples[label])
            extra = "" if value is fixed else f"   {100.0 * (value - fixed) / fixed:+.1f}% vs fixed"
            print(f"    {pool:8} {label:28} {value * 1e3:.3f} ms/task (median){extra}", flush=True)
        print("             all rounds (ms/task): " + json.dumps(
            {k: [round(v * 1e3, 3) for v in vs] for k, vs in samples.items()}), flush=True)
        book_fixed = gate_bookkeeping_seconds(10)
        book_gated = gate_bookkeeping_seconds({"min": 10, "max": 10})
        extra = book_gated - book_fixed
        print(f"             gate bookkeeping in-process (reserve+start+finish, real readers): fixed "
              f"{book_fixed * 1e6:.1f} us/task, gated {book_gated * 1e6:.1f} us/task: the gate adds "
              f"{extra * 1e6:.1f} us = {100.0 * extra / fixed:.1f}% of the fixed worker's CPU per task "
              f"(target < 5%)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("oom", "cpu", "all"), default="all")
    parser.add_argument("--pools", nargs="+", default=["threads", "gevent"])
    parser.add_argument("--limit-mb", type=int, default=700)
    parser.add_argument("--activities", type=int, default=16)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    with DevServer(port=0, db=":memory:") as server:
        if options.part in ("oom", "all"):
            part_oom(server.url, options.pools, options.limit_mb, options.activities, options.megabytes)
    if options.part in ("cpu", "all"):
        part_cpu(options.pools, options.tasks, options.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
