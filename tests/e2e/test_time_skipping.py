"""The time-skipping environment's rules, end to end (real workers, real sockets, threads and gevent).

Time jumps only while nothing is in flight and someone waits for it (a result, or ``env.sleep``);
every deadline the server keeps follows the virtual clock: timers, activity and workflow
timeouts, retry back-off, schedules, and the start time ``ctx.now()`` reports.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator, Optional

import pytest

from sync_worker import activity, workflow
from sync_worker.errors import ActivityFailed, WorkflowTimedOut
from sync_worker.testing import LiveEnvironment, WorkflowEnvironment
from sync_worker.testing.skipping import SettleTimeout
from tests.e2e._worker_support import suite_pool

DAY, HOUR = 86_400, 3_600
LONG = {"execution_timeout_seconds": 90 * DAY, "run_timeout_seconds": 90 * DAY}

_gate = threading.Event()


@activity.defn(name="ts.echo")
def echo(value: Any) -> Any:
    return value


@activity.defn(name="ts.blocked")
def blocked() -> str:
    assert _gate.wait(30), "the test never opened the gate"
    return "opened"


@workflow.defn(name="ts.start_time")
class StartTime:
    def run(self, ctx: Any) -> Any:
        return ctx.now().timestamp()


@workflow.defn(name="ts.unserved_activity")
class UnservedActivity:
    """An activity on a queue no worker polls: its schedule-to-start timeout passes on the virtual clock."""

    def run(self, ctx: Any) -> Any:
        try:
            yield ctx.schedule_activity("ts.echo", ["x"], queue="nobody-polls-this", schedule_to_start_timeout=2 * HOUR)
        except ActivityFailed as error:
            return {"timed_out": error.exception_type, "category": error.failure_category}
        return "ran"


@workflow.defn(name="ts.sleeper")
class Sleeper:
    def run(self, ctx: Any, seconds: int) -> Any:
        yield ctx.sleep(seconds)
        return (yield ctx.schedule_activity("ts.echo", ["woke"], start_to_close_timeout=60))


@workflow.defn(name="ts.waiter")
class Waiter:
    def __init__(self) -> None:
        self.released: Optional[str] = None

    @workflow.signal("release")
    def release(self, who: str) -> None:
        self.released = who

    def run(self, ctx: Any) -> Any:
        done = yield ctx.wait_condition(lambda: self.released is not None, timeout=HOUR)
        return self.released if done else "timed out"


@workflow.defn(name="ts.blocking")
class Blocking:
    def run(self, ctx: Any) -> Any:
        return (yield ctx.schedule_activity("ts.blocked", [], start_to_close_timeout=120))


WORKFLOWS = [StartTime, UnservedActivity, Sleeper, Waiter, Blocking]
ACTIVITIES = [echo, blocked]


@pytest.fixture
def env(durable_env: LiveEnvironment) -> Iterator[LiveEnvironment]:
    with durable_env.worker(workflows=WORKFLOWS, activities=ACTIVITIES) as worker:
        assert worker.backend.name == suite_pool()
        yield durable_env


def _start(env: LiveEnvironment, workflow_type: str, *args: Any, **options: Any) -> Any:
    return env.client.start_workflow(workflow_type, *args, task_queue=env.task_queue, **{**LONG, **options})


def test_ctx_now_is_the_virtual_start_time(env: LiveEnvironment) -> None:
    env.sleep(10 * DAY)
    expected = env.time()
    started_at = _start(env, "ts.start_time").result(timeout=30)
    assert abs(started_at - expected) < 60 and started_at > time.time() + 9 * DAY


def test_an_activity_timeout_passes_on_the_virtual_clock(env: LiveEnvironment) -> None:
    before = env.time()
    outcome = _start(env, "ts.unserved_activity").result(timeout=30)
    assert outcome == {"timed_out": "ActivityTimedOut", "category": "timeout"}
    assert 2 * HOUR <= env.time() - before < 2 * HOUR + 60


def test_a_workflow_execution_timeout_passes_on_the_virtual_clock(env: LiveEnvironment) -> None:
    before = env.time()
    handle = _start(env, "ts.sleeper", 5 * DAY, execution_timeout_seconds=DAY, run_timeout_seconds=DAY)
    with pytest.raises(WorkflowTimedOut):
        handle.result(timeout=30)
    assert DAY <= env.time() - before < DAY + 60


def test_time_does_not_skip_while_no_one_waits(env: LiveEnvironment) -> None:
    handle = _start(env, "ts.waiter")
    before = env.time()
    env.settle()  # the wait is open: only its one-hour timeout is due
    time.sleep(0.3)
    assert env.time() - before < 60, "nobody waited for time to pass, so it did not jump"
    handle.signal("release", ["dana"])
    assert handle.result(timeout=30) == "dana"
    assert env.time() - before < 60


def test_waiting_for_a_result_skips_to_the_timeout(env: LiveEnvironment) -> None:
    before = env.time()
    assert _start(env, "ts.waiter").result(timeout=30) == "timed out"
    assert HOUR <= env.time() - before < HOUR + 60


def test_auto_skipping_can_be_switched_off(env: LiveEnvironment) -> None:
    handle = _start(env, "ts.waiter")
    before = env.time()
    with env.auto_time_skipping_disabled(), pytest.raises(TimeoutError):
        handle.result(timeout=0.5)
    assert env.time() - before < 60
    env.sleep(2 * HOUR)  # sleep still moves the clock
    assert handle.describe().status == "completed"
    assert handle.result(timeout=5) == "timed out"


def test_sleep_returns_once_what_it_started_has_finished(env: LiveEnvironment) -> None:
    handle = _start(env, "ts.sleeper", 12 * HOUR)
    env.sleep(DAY)
    assert handle.describe().status == "completed", "the timer fired and its activity ran within the sleep"
    events = [e["event_type"] for e in handle.get_history()["events"]]
    assert "TimerFired" in events and "WorkflowCompleted" in events


def test_sleep_waits_for_running_work_and_names_it_when_it_takes_too_long(env: LiveEnvironment) -> None:
    _gate.clear()
    handle = _start(env, "ts.blocking")
    try:
        with pytest.raises(SettleTimeout, match="activity task"):
            env.settle(timeout=0.5)
        before = env.time()
        threading.Timer(0.3, _gate.set).start()
        env.sleep(HOUR)  # waits for the running activity first, then jumps
        assert HOUR <= env.time() - before < HOUR + 60
        assert handle.result(timeout=10) == "opened"
    finally:
        _gate.set()


def test_the_local_environment_has_the_same_shape_on_the_real_clock() -> None:
    with WorkflowEnvironment.start_local() as local:
        assert not local.supports_time_skipping and local.time_skipped == 0.0
        with local.worker(workflows=WORKFLOWS, activities=ACTIVITIES) as worker:
            assert worker.backend.name == suite_pool()
            before, wall = local.time(), time.monotonic()
            handle = local.client.start_workflow("ts.sleeper", 1, task_queue=local.task_queue)
            assert handle.result(timeout=30) == "woke"
            assert time.monotonic() - wall >= 0.9, "a one-second timer takes a second on the real clock"
            assert abs((local.time() - before) - (time.monotonic() - wall)) < 1.0


def test_a_start_between_the_quiescence_look_and_the_jump_is_not_overtaken() -> None:
    """The automatic skip looks (quiescent? the next deadline?) and moves the clock as one step under the
    engine's lock. A start committed between a look that saw the server idle and the jump used to be
    overtaken by it: the jump went to the new run's own 90-day timeout, which then fired before its first
    workflow task ran. Here a start is sent right after a look that saw the server idle; with the look and
    the move atomic it waits for the step, and no deadline of its run is jumped to."""
    with WorkflowEnvironment.start_time_skipping() as env:
        assert env.skipper is not None
        env.client.register_worker({"worker_id": "idle-worker", "task_queue": env.task_queue, "runtime": "python",
                                    "supported_workflow_types": ["raced.type"], "supported_activity_types": []})
        look, raced = env.server.busy_reason, threading.Event()
        threads = []

        def start() -> None:
            env.client.start_workflow("raced.type", task_queue=env.task_queue, workflow_id="raced",
                                      execution_timeout_seconds=90 * 86_400, run_timeout_seconds=90 * 86_400)

        def look_then_start() -> Any:
            answer = look()
            if answer is None and not threads:
                thread = threading.Thread(target=start)
                threads.append(thread)
                thread.start()
                raced.set()
                thread.join(0.5)  # the start lands here, between the look and the move, if nothing stops it
            return answer

        env.server.busy_reason = look_then_start  # type: ignore[method-assign]
        began = env.clock.time()
        with env.skipper.unlocked():  # a result is awaited: automatic skipping runs
            assert raced.wait(5)
            threads[0].join(5)
            time.sleep(0.3)  # more automatic steps: the new run's task is takeable, so none may jump
        run = env.client.describe_workflow("raced")
        assert run.status in ("pending", "running", "waiting"), run.status
        assert env.clock.time() - began < 86_400
