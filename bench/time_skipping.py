"""Wall time of weeks of virtual time: the time-skipping environment on threads and on gevent.

    python3 bench/time_skipping.py              # 5 rounds per scenario and pool
    python3 bench/time_skipping.py --rounds 3

The scenarios are examples/subscription_billing.py's, as tests/e2e/test_time_skipping_examples.py
runs them: a month-long timer then an activity; a 7-day signal wait released after
``env.sleep(3 days)``; a card declined three times and retried 1, 2 and 4 hours apart; a daily
schedule for a week (7 runs). Each pool runs in a child process of its own (gevent patched first);
each round gets a fresh environment, so the figure covers one scenario's workflow work, not the
server's start. Printed per scenario and pool: wall time (min / median / max), the virtual time
it covered, and their ratio (virtual seconds per wall second). The peer is the same scenario with
its durations shrunk to seconds (``--peer``: timers of 1-4 s on the same environment), to show
what the waiting costs once it is skipped: a ratio of wall times near 1 means skipping a month
costs no more than skipping seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = ("month_timer", "signal_after_3_days", "retries_hours_apart", "daily_schedule_week")


def _child(pool: str, rounds: int, scale: float) -> None:
    if pool == "gevent":
        from gevent import monkey

        monkey.patch_all()
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import subscription_billing as billing

    from sync_worker.client import ScheduleAction, ScheduleSpec
    from sync_worker.testing import WorkflowEnvironment

    peer = scale != 1
    if peer:  # the same workflows with a second wherever they wait a day or an hour
        vars(billing).update(DAY=1, HOUR=1)
    day = billing.DAY

    def month_timer(env: Any) -> None:
        handle = env.client.start_workflow("billing.renewal", "a", 1, task_queue=env.task_queue, **billing.LONG_RUN)
        handle.result(timeout=60)

    def signal_after_3_days(env: Any) -> None:
        handle = env.client.start_workflow("billing.trial", "b", task_queue=env.task_queue, **billing.LONG_RUN)
        env.sleep(3 * day)
        handle.signal("upgrade", ["pro"])
        assert handle.result(timeout=60)["outcome"] == "upgraded to pro"

    def retries_hours_apart(env: Any) -> None:
        billing.FLAKY_CARDS["c"] = 3
        handle = env.client.start_workflow("billing.collect", "c", 5, task_queue=env.task_queue, **billing.LONG_RUN)
        handle.result(timeout=60)

    def daily_schedule_week(env: Any) -> None:
        every = "PT1S" if peer else "P1D"
        action = ScheduleAction("billing.daily_report", task_queue=env.task_queue, input=["eu"])
        env.client.create_schedule(spec=ScheduleSpec(intervals=[{"every": every}]), action=action)
        env.sleep(7 * day)

    runs: Dict[str, Callable[[Any], None]] = {"month_timer": month_timer, "signal_after_3_days": signal_after_3_days,
                                              "retries_hours_apart": retries_hours_apart,
                                              "daily_schedule_week": daily_schedule_week}
    out: Dict[str, Dict[str, List[float]]] = {}
    for name in SCENARIOS:
        walls, virtuals = [], []
        for _ in range(rounds):
            with WorkflowEnvironment.start_time_skipping(pool=pool) as env, \
                    env.worker(workflows=billing.WORKFLOWS, activities=billing.ACTIVITIES):
                before, started = env.time(), time.perf_counter()
                runs[name](env)
                walls.append(time.perf_counter() - started)
                virtuals.append(env.time() - before)
        out[name] = {"wall": walls, "virtual": virtuals}
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", choices=("threads", "gevent"))
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.rounds, args.scale)
        return
    results: Dict[str, Any] = {}
    for pool in ("threads", "gevent"):
        for label, scale in (("virtual", 1.0), ("peer", 1 / 86_400)):
            done = subprocess.run([sys.executable, __file__, "--child", pool, "--rounds", str(args.rounds),
                                   "--scale", repr(scale)], capture_output=True, text=True, check=True, cwd=ROOT)
            results[(pool, label)] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{'scenario':<22} {'pool':<8} {'wall s (min/median/max)':<26} {'virtual':>12} {'virtual/wall':>14} "
          f"{'wall vs peer':>13}")
    for name in SCENARIOS:
        for pool in ("threads", "gevent"):
            walls = results[(pool, "virtual")][name]["wall"]
            virtual = statistics.median(results[(pool, "virtual")][name]["virtual"])
            peer = statistics.median(results[(pool, "peer")][name]["wall"])
            median = statistics.median(walls)
            print(f"{name:<22} {pool:<8} {min(walls):6.3f} / {median:6.3f} / {max(walls):6.3f}     "
                  f"{virtual / 86_400:9.2f} d {virtual / median:14,.0f} {median / peer:12.2f}x")


if __name__ == "__main__":
    main()
