"""examples/subscription_billing.py under the pytest plugin's ``durable_env``: weeks of virtual time.

Each test uses only the plugin's fixtures (``durable_env``, ``durable_client``; no conftest) and
runs real workers (threads, and greenlets in the gevent suite) against the in-process dev server
on a virtual clock. What is asserted is the outcome and the *virtual* time that passed; the wall
time gets a generous bound only (the figures come from ``bench/time_skipping.py``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import types
from typing import Any, Iterator, List

import pytest

from sync_worker.client import Client, ScheduleAction, ScheduleSpec
from sync_worker.testing import LiveEnvironment
from tests.e2e._worker_support import suite_pool

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DAY, HOUR = 86_400, 3_600
#: Far above the ~0.1-0.5 s these take (bench/time_skipping.py); only a hang or a real sleep trips it.
WALL_BOUND = 20.0


def _load_example() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("subscription_billing",
                                                  os.path.join(REPO, "examples", "subscription_billing.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["subscription_billing"] = module
    spec.loader.exec_module(module)
    return module


billing = _load_example()


@pytest.fixture
def worker(durable_env: LiveEnvironment) -> Iterator[Any]:
    assert durable_env.pool == suite_pool()
    with durable_env.worker(workflows=billing.WORKFLOWS, activities=billing.ACTIVITIES) as running:
        yield running


def test_a_month_long_timer_completes_at_once(durable_env: LiveEnvironment, durable_client: Client,
                                              worker: Any) -> None:
    before, wall = durable_env.time(), time.monotonic()
    handle = durable_client.start_workflow("billing.renewal", "acct-1", 1999, task_queue=durable_env.task_queue,
                                           **billing.LONG_RUN)
    assert handle.result(timeout=30) == {"account": "acct-1", "receipt": "receipt-acct-1-1999-attempt-1"}
    assert 30 * DAY <= durable_env.time() - before < 30 * DAY + 60
    assert time.monotonic() - wall < WALL_BOUND
    fired = [e for e in handle.get_history()["events"] if e["event_type"] == "TimerFired"]
    assert len(fired) == 1 and fired[0]["payload"]["delay_seconds"] == 30 * DAY


def test_a_signal_before_the_seven_day_timeout(durable_env: LiveEnvironment, durable_client: Client,
                                               worker: Any) -> None:
    handle = durable_client.start_workflow("billing.trial", "acct-2", task_queue=durable_env.task_queue,
                                           **billing.LONG_RUN)
    before, wall = durable_env.time(), time.monotonic()
    durable_env.sleep(3 * DAY)
    assert 3 * DAY <= durable_env.time() - before < 3 * DAY + 60
    assert handle.describe().status in ("waiting", "running"), "the 7-day wait is still open after 3 days"
    assert handle.query("plan")["result"] is None
    handle.signal("upgrade", ["pro"])
    assert handle.result(timeout=30) == {"account": "acct-2", "outcome": "upgraded to pro"}
    assert durable_env.time() - before < 3 * DAY + 60, "the signal released the wait, not its timeout"
    assert time.monotonic() - wall < WALL_BOUND


def test_without_the_signal_the_trial_ends_after_seven_days(durable_env: LiveEnvironment, durable_client: Client,
                                                             worker: Any) -> None:
    before = durable_env.time()
    handle = durable_client.start_workflow("billing.trial", "acct-3", task_queue=durable_env.task_queue,
                                           **billing.LONG_RUN)
    assert handle.result(timeout=30) == {"account": "acct-3", "outcome": "trial ended"}
    assert 7 * DAY <= durable_env.time() - before < 7 * DAY + 60


def test_retries_hours_apart(durable_env: LiveEnvironment, durable_client: Client, worker: Any) -> None:
    billing.FLAKY_CARDS["acct-4"] = 3  # declined three times: retried after 1 h, 2 h, then 4 h
    before, wall = durable_env.time(), time.monotonic()
    handle = durable_client.start_workflow("billing.collect", "acct-4", 500, task_queue=durable_env.task_queue,
                                           **billing.LONG_RUN)
    assert handle.result(timeout=30) == "receipt-acct-4-500-attempt-4"
    assert 7 * HOUR <= durable_env.time() - before < 7 * HOUR + 60
    assert time.monotonic() - wall < WALL_BOUND
    retries = [e["payload"] for e in handle.get_history()["events"] if e["event_type"] == "ActivityRetryScheduled"]
    assert [r["backoff_seconds"] for r in retries] == [HOUR, 2 * HOUR, 4 * HOUR]


def test_a_daily_schedule_for_a_week(durable_env: LiveEnvironment, durable_client: Client, worker: Any) -> None:
    before, wall = durable_env.time(), time.monotonic()
    durable_client.create_schedule(schedule_id="daily-report", spec=ScheduleSpec(intervals=[{"every": "P1D"}]),
                                   action=ScheduleAction("billing.daily_report", task_queue=durable_env.task_queue,
                                                         input=["eu"]))
    durable_env.sleep(7 * DAY)
    assert 7 * DAY <= durable_env.time() - before < 7 * DAY + 60
    assert time.monotonic() - wall < WALL_BOUND
    runs = durable_client.list_workflows(workflow_type="billing.daily_report").executions
    assert len(runs) == 7 and {run.status for run in runs} == {"completed"}
    days: List[str] = sorted(durable_client.get_result(run.workflow_id)["day"] for run in runs)
    assert len(set(days)) == 7, f"one report per day, each stamped by ctx.now(): {days}"
    audit = durable_client.get_schedule_history("daily-report").events
    assert [event.event_type for event in audit].count("ScheduleTriggered") == 7
