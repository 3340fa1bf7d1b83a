"""The dev server's one clock: a virtual clock moves every deadline it records, and the server says
when it is quiescent and what its next deadline is (what the time-skipping environment reads)."""

from __future__ import annotations

import ast
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Iterator

import pytest

import sync_worker.devserver as devserver_package
from sync_worker.devserver import DevServer
from sync_worker.devserver.clock import SystemClock, VirtualClock
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import Raw

DAY = 86_400.0


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@pytest.fixture
def virtual() -> Iterator[DevServer]:
    with DevServer(port=0, clock=VirtualClock(), tick_seconds=0.02) as server:
        yield server


def register(raw: Raw) -> None:
    raw.ok("POST", "/worker/register", {"worker_id": "w1", "task_queue": "q", "supported_workflow_types": ["t"],
                                        "supported_activity_types": ["act"]}, plane="worker")


def test_virtual_clock_moves_forward_only() -> None:
    clock = VirtualClock(start=1_000_000.0)
    assert 1_000_000.0 <= clock.time() < 1_000_060.0
    assert clock.advance(DAY) == DAY
    assert clock.time() >= 1_000_000.0 + DAY
    assert clock.advance_to(clock.time() - 5) == 0.0
    jumped = clock.advance_to(clock.time() + 30)
    assert 29.9 < jumped <= 30.0 and clock.skipped == pytest.approx(DAY + jumped)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_the_real_clock_costs_nothing() -> None:
    with DevServer(port=0) as server:
        assert server.engine.now is time.time  # the indirection is the builtin itself
        assert isinstance(server.clock, SystemClock)


def test_the_server_reads_the_time_only_through_its_clock() -> None:
    """No module of the dev server calls time.time(), datetime.now() or a bare now() (waits use monotonic)."""
    root = Path(devserver_package.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "clock.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else ""
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                name = f"{func.value.id}.{func.attr}"
            if name in ("time.time", "datetime.now", "datetime.utcnow", "date.today", "now"):
                offenders.append((path.name, name))
    # The HTTP Date header (wire.py) and ordered ids (util.py) only need a number that grows.
    assert set(offenders) <= {("wire.py", "time.time"), ("util.py", "time.time")}, offenders
    assert len(offenders) == 2


def test_recorded_times_and_deadlines_follow_the_virtual_clock(virtual: DevServer) -> None:
    raw = Raw(virtual.url)
    clock = virtual.clock
    assert isinstance(clock, VirtualClock)
    clock.advance(40 * DAY)
    register(raw)
    raw.start("wf-1")
    task = raw.poll()
    assert _ts(task["lease_expires_at"]) > time.time() + 39 * DAY
    assert raw.complete(task, [{"type": "start_timer", "delay_seconds": 3600}]).status_code == 200
    started, *_ = [e for e in raw.history("wf-1") if e["event_type"] == "WorkflowStarted"]
    assert abs(_ts(started["payload"]["timestamp"]) - clock.time()) < 60
    assert abs(_ts(started["recorded_at"]) - (time.time() + 40 * DAY)) < 60
    health = raw.ok("GET", "/health")
    assert _ts(health["timestamp"]) > time.time() + 39 * DAY
    due = virtual.next_due()
    assert due is not None and abs(due - (clock.time() + 3600)) < 5


def test_quiescence_and_the_next_deadline(virtual: DevServer) -> None:
    raw = Raw(virtual.url)
    clock = virtual.clock
    assert isinstance(clock, VirtualClock)
    assert virtual.busy_reason() is None and virtual.next_due() is None

    raw.start("wf-2", workflow_type="t")
    assert virtual.busy_reason() is None, "nobody registered t: the ready task is no one's to take"
    assert virtual.next_due() is None  # no run or execution timeout was asked for: nothing is due

    register(raw)
    assert "workflow task of 't' ready" in (virtual.busy_reason() or "")
    task = raw.poll()
    assert "workflow task(s) leased" in (virtual.busy_reason() or "")
    raw.complete(task, [{"type": "schedule_activity", "activity_type": "act", "arguments": envelope([]),
                         "queue": "q", "start_to_close_timeout": 60,
                         "retry_policy": {"max_attempts": 3, "backoff_seconds": [7200, 7200]}}])
    assert "activity 'act' ready" in (virtual.busy_reason() or "")
    act = raw.poll(kind="activity")
    assert "activity task(s) running" in (virtual.busy_reason() or "")
    failed = raw.call("POST", f"/worker/activity-tasks/{act['task_id']}/fail",
                      {"lease_owner": act["lease_owner"], "activity_attempt_id": act["activity_attempt_id"],
                       "failure": {"message": "declined", "type": "RuntimeError"}},
                      plane="worker")
    assert failed.status_code == 200, failed.text
    assert virtual.busy_reason() is None, "an activity in back-off waits for the clock only"
    due = virtual.next_due()
    assert due is not None and abs(due - (clock.time() + 7200)) < 5

    clock.advance_to(due)
    virtual.fire_due()
    assert "activity 'act' ready" in (virtual.busy_reason() or ""), "the back-off ended on the virtual clock"


def test_schedules_fire_on_the_virtual_clock(virtual: DevServer) -> None:
    raw = Raw(virtual.url)
    clock = virtual.clock
    assert isinstance(clock, VirtualClock)
    raw.ok("POST", "/schedules", {"schedule_id": "daily", "spec": {"intervals": [{"every": "P1D"}]},
                                  "action": {"workflow_type": "report", "task_queue": "q"}})
    due = virtual.next_due()
    assert due is not None and 0 < due - clock.time() <= DAY
    clock.advance_to(due)
    virtual.fire_due()
    history = raw.ok("GET", "/schedules/daily/history")["events"]
    assert [event["event_type"] for event in history] == ["ScheduleCreated", "ScheduleTriggered"]
    after = virtual.next_due()
    assert after is not None and after - due == pytest.approx(DAY, abs=1)


def test_a_query_in_flight_is_work() -> None:
    with DevServer(port=0, clock=VirtualClock(), query_timeout_seconds=2) as server:
        raw = Raw(server.url)
        raw.start("wf-q")
        asked = threading.Thread(target=lambda: raw.call("POST", "/workflows/wf-q/query/state", {}), daemon=True)
        asked.start()
        deadline = time.monotonic() + 5
        while "query task(s) waiting" not in (server.busy_reason() or ""):
            assert time.monotonic() < deadline, server.busy_reason()
            time.sleep(0.01)
        asked.join(10)
        assert server.busy_reason() is None
