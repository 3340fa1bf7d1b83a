"""nestjs-durable steps: steps/s and worker CPU per step, ours against the published ``durable-worker``.

Run from the repository root after ``scripts/prepare`` (Redis, the npm engine, the control venv)::

    python3 bench/nestjs_steps.py                         # 400 steps x 3 rounds, 8 slots, Redis
    python3 bench/nestjs_steps.py --steps 1000 --concurrency 16 --sleep-ms 20

The real engine (``@dudousxd/nestjs-durable-core`` 0.62.0 with the BullMQ transport 0.19.0,
``tests/interop/nestjs/engine.mjs``) on the shared Redis, one engine process and key prefix per
worker: ``sync-worker nestjs`` on threads, the same under gevent, and the published asyncio
``durable-worker`` 0.26.1 (``run_redis_worker``, fixed concurrency, its own venv). Rounds are
interleaved (threads, gevent, control, threads, ...) so a busy machine slows every worker alike.
Each round starts N one-step workflows at once (``engine.start`` x N) and waits until all N are
terminal; steps/s = N / that wall time (the engine's own dispatch and result handling included, the
same for every worker). Worker CPU = user+sys of the worker process (``/proc/<pid>/stat``) over the
round, per step. A warm-up round runs first and is not counted; the median of the rounds is printed.
The step is ``bench.echo`` (returns its input index), or ``bench.sleep`` with ``--sleep-ms``.

Figures are printed, never asserted: they depend on the machine (and on the engine, which is in
the loop for every step).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.interop._nestjs_harness import (
    Engine,
    StepWorkerProcess,
    flush_redis_prefix,
    missing,
    redis_url,
)

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime (fields 14, 15)


def one_round(engine: Engine, worker: StepWorkerProcess, tag: str, steps: int, step: str,
              sleep_ms: int) -> Tuple[float, float]:
    assert worker.proc is not None
    cpu0, t0 = cpu_seconds(worker.proc.pid), time.monotonic()
    engine.call("startMany", prefix=tag, count=steps, step=step, input={"ms": sleep_ms}, timeout=300)
    outcome = engine.call("waitMany", prefix=tag, count=steps, timeoutMs=300000, timeout=320)
    wall, cpu = time.monotonic() - t0, cpu_seconds(worker.proc.pid) - cpu0
    if outcome["completed"] != steps:
        raise RuntimeError(f"{worker.kind}: only {outcome} of {steps} completed:\n{worker.log()[-2000:]}")
    return steps / wall, cpu / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--sleep-ms", type=int, default=0, help="run bench.sleep (I/O wait) instead of bench.echo")
    parser.add_argument("--kinds", default="threads,gevent,control")
    args = parser.parse_args()
    reason = missing("redis", control="control" in args.kinds)
    if reason:
        raise SystemExit(f"nestjs bench: {reason}")
    url = redis_url()
    assert url is not None
    step = "bench.sleep" if args.sleep_ms else "bench.echo"
    kinds = args.kinds.split(",")
    pairs: Dict[str, Tuple[Engine, StepWorkerProcess]] = {}
    rounds: Dict[str, List[Tuple[float, float]]] = {kind: [] for kind in kinds}
    results: Dict[str, Tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as logs:
        try:
            for kind in kinds:  # the same engine build and Redis for all, one prefix each
                prefix = f"swnj-bench{kind[:3]}{os.getpid()}"
                flush_redis_prefix(url, prefix)
                worker = StepWorkerProcess(kind, url, prefix, lease=30.0, log_dir=Path(logs),
                                           concurrency=str(args.concurrency)).start()
                pairs[kind] = (Engine("redis", prefix, url=url), worker)
                one_round(*pairs[kind], f"{kind}-warm", min(100, args.steps), step, args.sleep_ms)
            for i in range(args.rounds):  # interleaved, so a noisy neighbour hits every worker alike
                for kind in kinds:
                    rounds[kind].append(one_round(*pairs[kind], f"{kind}-{i}", args.steps, step, args.sleep_ms))
        finally:
            for engine, worker in pairs.values():
                worker.stop()
                engine.close()
                flush_redis_prefix(url, worker.prefix)
    for kind in kinds:
        rate = statistics.median(r for r, _ in rounds[kind])
        cpu = statistics.median(c for _, c in rounds[kind])
        results[kind] = (rate, cpu)
        print(f"{kind:8s} {step} x{args.steps} c={args.concurrency}: {rate:8.1f} steps/s   "
              f"worker CPU {cpu * 1e3:6.2f} ms/step   (rounds: "
              + ", ".join(f"{r:.0f}/s {c * 1e3:.2f}ms" for r, c in rounds[kind]) + ")", flush=True)
    if "control" in results:
        base_rate, base_cpu = results["control"]
        for kind, (rate, cpu) in results.items():
            if kind != "control":
                print(f"{kind} vs published durable-worker: {rate / base_rate:.2f}x steps/s, "
                      f"{cpu / base_cpu:.2f}x CPU per step")


if __name__ == "__main__":
    main()
