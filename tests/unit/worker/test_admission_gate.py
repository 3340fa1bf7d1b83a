"""The admission gate and the adaptive controller, with injected readers and a fake clock.

Each test names the rule of docs/concurrency.md (seed 004 / nestjs-durable.md §2) it proves.
"""

from __future__ import annotations

import logging
from typing import Any, List, Optional

import pytest

from sync_worker.runtime.admission import AdmissionGate, MemoryProbe, resolve_concurrency
from sync_worker.runtime.admission.peak import PeakTracker
from sync_worker.runtime.metrics import (
    ADMISSION_DEFERRALS,
    ADMISSION_DEFERRING,
    CONCURRENCY_LIMIT,
    MEMORY_USAGE,
    InMemoryMetrics,
)

MB = 1_000_000
CEILING = 1000 * MB


class Machine:
    """Injected memory readers and clocks: usage/peak in bytes, a monotonic and a CPU clock."""

    def __init__(self, usage: Optional[int] = 100 * MB, ceiling: Optional[int] = CEILING) -> None:
        self.usage = usage
        self.ceiling = ceiling
        self.peak = usage or 0
        self.now = 1000.0
        self.cpu = 0.0

    def allocate(self, nbytes: int) -> None:
        assert self.usage is not None
        self.usage += nbytes
        self.peak = max(self.peak, self.usage)

    def free(self, nbytes: int) -> None:
        assert self.usage is not None
        self.usage -= nbytes

    def reset_peak(self) -> bool:
        """The process's high-water mark back to its current RSS (/proc/self/clear_refs ``5``)."""
        if not self.resettable:
            return False
        self.peak = self.usage or 0
        return True

    resettable = True

    def peaks(self) -> PeakTracker:
        return PeakTracker(reader=lambda: (self.usage or 0, self.peak), resetter=self.reset_peak)

    def gate(self, option: Any = "adaptive", **kwargs: Any) -> AdmissionGate:
        probe = MemoryProbe(usage_reader=lambda: self.usage, limit_reader=lambda: self.ceiling,
                            peak_reader=lambda: self.peak, peaks=self.peaks())
        return AdmissionGate(resolve_concurrency(option), probe=probe, clock=lambda: self.now,
                             wall_clock=lambda: 1_700_000_000.0 + self.now, cpu_seconds=lambda: self.cpu, **kwargs)

    def run_solo(self, gate: AdmissionGate, name: str, cost: int, seconds: float = 1.0, ok: bool = True) -> None:
        """One task of ``name`` that allocates ``cost`` while it runs, alone."""
        reservation = gate.try_reserve()
        assert reservation is not None
        reservation.start(name)
        self.allocate(cost)
        gate.status()  # any reading while it runs (tick, a waiting poller's re-check, status) samples it
        self.now += seconds
        self.free(cost)
        reservation.finish(ok)


def _grown(gate: AdmissionGate, limit: int) -> None:
    gate.limit = limit


# -- modes ------------------------------------------------------------------------------------


def test_fixed_n_is_never_gated_but_measures() -> None:
    machine = Machine(usage=990 * MB)  # 99 % used
    gate = machine.gate(4)
    held = [gate.try_reserve() for _ in range(6)]
    assert all(r is not None for r in held)  # the semaphore of the pool bounds N, not the gate
    status = gate.status()
    assert status.mode == "fixed" and status.gate == "off" and status.usage_bytes == 990 * MB
    assert status.memory_source == "custom" and status.ceiling_bytes == CEILING
    gate.tick()
    assert gate.limit == 4  # the controller never changes a fixed limit


def test_ram_admission_false_turns_the_gate_off_but_keeps_the_limit() -> None:
    machine = Machine(usage=990 * MB)
    gate = machine.gate({"ramAdmission": False, "start": 2, "max": 4})
    first, second = gate.try_reserve(), gate.try_reserve()
    assert first is not None and second is not None  # 99 % used: admitted anyway
    assert gate.try_reserve() is None  # the live limit still applies
    assert gate.status().gate == "off"


# -- admission rules ----------------------------------------------------------------------------


def test_nothing_in_flight_always_admits() -> None:
    machine = Machine(usage=999 * MB)
    gate = machine.gate()
    reservation = gate.try_reserve()
    assert reservation is not None  # 99.9 % used, yet nothing runs: admitting is the only way out
    assert gate.status().idle_usage_bytes == 999 * MB  # refreshed idle baseline


def test_at_the_live_limit_new_work_waits() -> None:
    machine = Machine()
    gate = machine.gate({"start": 2, "max": 4})
    machine.run_solo(gate, "a", 10 * MB)
    assert gate.try_reserve() is not None and gate.try_reserve() is not None
    assert gate.try_reserve() is None
    assert gate.status().gate == "open"  # a limit wait is not a memory deferral


def test_unreadable_usage_or_ceiling_admits() -> None:
    for machine in (Machine(usage=None), Machine(ceiling=None)):
        gate = machine.gate({"start": 3, "max": 3})
        assert [gate.try_reserve() is not None for _ in range(3)] == [True, True, True]


def test_first_task_runs_alone_until_one_finishes() -> None:
    machine = Machine()
    gate = machine.gate({"start": 4, "max": 4})
    first = gate.try_reserve()
    assert first is not None
    first.start("report")
    assert gate.try_reserve() is None  # 10 % used, limit 4, yet no measurement yet
    machine.allocate(200 * MB)
    machine.free(200 * MB)
    first.finish()
    assert gate.status().step_cost_bytes == {"report": 200 * MB}
    assert gate.try_reserve() is not None and gate.try_reserve() is not None


def test_projection_reserves_learned_costs_and_compares_with_the_admit_mark() -> None:
    machine = Machine(usage=100 * MB)
    gate = machine.gate({"start": 8, "max": 8})
    machine.run_solo(gate, "report", 200 * MB)
    # idle 100 MB + 200 per reservation: 1 → 30 %, 2 → 50 %, 3 → 70 %, 4 → 90 % > 75 %
    admitted = [gate.try_reserve() for _ in range(4)]
    assert [r is not None for r in admitted] == [True, True, True, False]
    assert gate.status().gate == "deferring" and gate.deferring


def test_projection_uses_current_usage_when_it_is_higher() -> None:
    machine = Machine(usage=100 * MB)
    gate = machine.gate({"start": 8, "max": 8})
    machine.run_solo(gate, "report", 100 * MB)
    running = gate.try_reserve()
    assert running is not None
    running.start("report")
    machine.allocate(600 * MB)  # it allocated far more than learned: usage 700 MB
    assert gate.try_reserve() is None  # 700 + 100 = 80 % > 75 %, though reservations say 30 %


def test_hysteresis_resume_mark_while_deferring() -> None:
    machine = Machine(usage=100 * MB)
    gate = machine.gate({"start": 8, "max": 8})
    machine.run_solo(gate, "r", 200 * MB)
    held = [gate.try_reserve() for _ in range(3)]  # projected 70 %
    assert gate.try_reserve() is None  # 90 %: deferring
    held[0].release()  # type: ignore[union-attr]
    # now projected for one more: 100 + 2*200 + 200 = 70 % <= 75 but > 65 (resume mark)
    assert gate.try_reserve() is None
    held[1].release()  # type: ignore[union-attr]
    assert gate.try_reserve() is not None  # 50 % <= 65 %: open again
    assert gate.status().gate == "open"


def test_latch_releases_when_nothing_is_in_flight_or_a_tick_sees_room(caplog: pytest.LogCaptureFixture) -> None:
    machine = Machine(usage=100 * MB)
    gate = machine.gate({"start": 8, "max": 8})
    machine.run_solo(gate, "r", 200 * MB)
    held = [gate.try_reserve() for _ in range(3)]
    with caplog.at_level(logging.INFO, logger="sync_worker.runtime.admission"):
        assert gate.try_reserve() is None and gate.try_reserve() is None  # logged once
        gate.tick()  # usage 10 % <= resume 65 %: the tick opens the latch
        assert not gate.deferring
        gate.tick()  # still open: not logged again
    messages = [r.getMessage() for r in caplog.records]
    assert sum("deferring" in m for m in messages) == 1
    assert sum("gate open" in m for m in messages) == 1
    for reservation in held:
        reservation.release()  # type: ignore[union-attr]
    assert gate.try_reserve() is not None


def test_unseen_type_is_charged_the_largest_known_cost_and_costs_are_the_max_of_5() -> None:
    machine = Machine(usage=100 * MB)
    gate = machine.gate({"start": 8, "max": 8})
    machine.run_solo(gate, "small", 10 * MB)
    machine.run_solo(gate, "big", 300 * MB)
    for cost in (50, 40, 30, 20, 10):  # five newer samples push 300 out of "big"'s last 5
        assert gate.status().step_cost_bytes["big"] >= cost * MB
        machine.run_solo(gate, "big", cost * MB)
    assert gate.status().step_cost_bytes == {"big": 50 * MB, "small": 10 * MB}
    # the type of the next task is unknown before the poll: charged max(50, 10) = 50 MB
    assert gate._costs.estimate(None) == 50 * MB and gate._costs.estimate("new") == 50 * MB
    assert gate._costs.estimate("small") == 10 * MB


def test_cost_is_learned_only_from_solo_runs_and_includes_the_peak() -> None:
    machine = Machine(usage=100 * MB)
    gate = machine.gate({"start": 8, "max": 8})
    machine.run_solo(gate, "probe", 1 * MB)
    a, b = gate.try_reserve(), gate.try_reserve()
    assert a is not None and b is not None
    a.start("x")
    b.start("y")
    machine.allocate(300 * MB)
    machine.free(300 * MB)
    a.finish()
    b.finish()
    assert "x" not in gate.status().step_cost_bytes and "y" not in gate.status().step_cost_bytes
    # allocate-and-free between two readings: only the rise of the process peak saw it
    machine = Machine(usage=100 * MB)
    gate = machine.gate({"start": 8, "max": 8})
    solo = gate.try_reserve()
    assert solo is not None
    solo.start("spiky")
    machine.allocate(250 * MB)
    machine.free(250 * MB)
    solo.finish()
    assert gate.status().step_cost_bytes["spiky"] == 250 * MB


def test_a_solo_runs_peak_is_learned_when_no_reading_sees_it() -> None:
    """Issue 30: allocate 200 MB, hold, free, with no reading in between (a 0.5 s task, a 2 s tick,
    pollers held at the limit without reading memory). Every solo run is measured by the process's
    high-water mark, reset at its start, so five such runs never wear the learned cost down."""
    machine = Machine(usage=100 * MB)
    gate = machine.gate({"start": 1, "max": 8})
    machine.peak = 900 * MB  # an older, higher peak (an earlier, bigger task)
    for _ in range(6):
        reservation = gate.try_reserve()
        assert reservation is not None
        reservation.start("allocate")
        machine.allocate(200 * MB)
        machine.now += 0.5
        machine.free(200 * MB)
        reservation.finish()
        assert gate.status().step_cost_bytes["allocate"] == 200 * MB
        assert gate.status().step_cost_sources["allocate"] == "process_peak"
    assert gate.status().to_wire()["memory"]["stepCostSource"] == {"allocate": "process_peak"}


def test_a_high_water_mark_that_cannot_be_reset_is_used_only_when_the_run_beats_it() -> None:
    machine = Machine(usage=100 * MB)
    machine.resettable = False
    gate = machine.gate({"start": 1, "max": 8})
    machine.peak = 900 * MB
    machine.run_solo(gate, "below", 200 * MB)  # the old mark hides the peak: the sampled reading counts
    assert gate.status().step_cost_bytes["below"] == 200 * MB
    assert gate.status().step_cost_sources["below"] == "sampled"
    reservation = gate.try_reserve()
    assert reservation is not None
    reservation.start("above")
    machine.allocate(1000 * MB)  # beats the old mark: the new high is this run's, exact
    machine.free(1000 * MB)
    reservation.finish()
    assert gate.status().step_cost_bytes["above"] == 1000 * MB
    assert gate.status().step_cost_sources["above"] == "process_peak"


def test_tick_samples_growth_of_a_solo_task() -> None:
    machine = Machine(usage=100 * MB)
    gate = machine.gate()
    machine.peak = 10_000 * MB  # a high old peak hides this run from ru_maxrss
    reservation = gate.try_reserve()
    assert reservation is not None
    reservation.start("grower")
    machine.usage = 400 * MB
    gate.tick()
    machine.usage = 120 * MB
    reservation.finish()
    assert gate.status().step_cost_bytes["grower"] == 300 * MB


def test_step_cost_tracking_false_is_a_usage_only_gate() -> None:
    machine = Machine(usage=100 * MB)
    gate = machine.gate({"stepCostTracking": False, "start": 8, "max": 8})
    first = gate.try_reserve()
    assert first is not None
    first.start("r")
    assert gate.try_reserve() is not None  # no "first task alone" rule without cost tracking
    machine.allocate(700 * MB)
    assert gate.try_reserve() is None  # 80 % > 75 %
    first.finish()
    assert gate.status().step_cost_bytes == {}


# -- waiting ----------------------------------------------------------------------------------


class Waits:
    """The gate's event factory in tests: each wait advances the fake clock (unless the event was
    set: a wake-up); ``stop`` turns true after ``stop_after`` waits."""

    def __init__(self, machine: Machine, stop_after: Optional[int] = 100,
                 on_wait: Optional[Any] = None) -> None:
        self.machine = machine
        self.calls: List[float] = []
        self.stop_after = stop_after
        self.on_wait = on_wait

    def event(self) -> FakeEvent:
        return FakeEvent(self)

    def stop(self) -> bool:
        return self.stop_after is not None and len(self.calls) >= self.stop_after


class FakeEvent:
    def __init__(self, waits: Waits) -> None:
        self.waits = waits
        self.flag = False

    def set(self) -> None:
        self.flag = True

    def clear(self) -> None:
        self.flag = False

    def is_set(self) -> bool:
        return self.flag

    def wait(self, timeout: Optional[float] = None) -> bool:
        if self.flag:
            return True
        assert timeout is not None
        self.waits.calls.append(timeout)
        self.waits.machine.now += timeout
        if self.waits.on_wait is not None:
            self.waits.on_wait(len(self.waits.calls))
        return self.flag


def _deferring_gate(machine: Machine, waits: Waits, **knobs: Any) -> AdmissionGate:
    gate = machine.gate(dict({"start": 8, "max": 8}, **knobs), event_factory=waits.event)
    machine.run_solo(gate, "r", 300 * MB)
    for _ in range(2):
        reservation = gate.try_reserve()
        assert reservation is not None
        reservation.start("r")
    return gate  # 100 + 3*300 = 100 % projected for one more


def test_reserve_polls_every_admission_poll_ms_and_never_rejects() -> None:
    machine = Machine()

    def free_both(calls: int) -> None:
        if calls == 5:  # both running tasks finish: that wakes the waiter at once
            for reservation in list(gate._records.values()):
                reservation.finish()

    waits = Waits(machine, on_wait=free_both)
    gate = _deferring_gate(machine, waits)
    reservation = gate.reserve(stop=waits.stop)
    assert reservation is not None and not reservation.forced
    assert waits.calls == [0.25] * 5  # admissionPollMs = 250, then woken by the finish
    status = gate.status()
    assert status.deferrals == 1 and status.waiting == 0
    assert status.last_deferred_at_ms == int((1_700_000_000.0 + 1000.0 + 1.0) * 1000)


def test_reserve_returns_none_when_the_caller_stops_waiting() -> None:
    machine = Machine()
    waits = Waits(machine, stop_after=3)
    gate = _deferring_gate(machine, waits)
    assert gate.reserve(stop=waits.stop) is None
    assert len(waits.calls) == 3 and gate.status().waiting == 0


def test_max_wait_budget_admits_anyway() -> None:
    machine = Machine()
    waits = Waits(machine)
    gate = _deferring_gate(machine, waits, admissionMaxWaitMs=1000)
    reservation = gate.reserve(stop=waits.stop)
    assert reservation is not None and reservation.forced
    assert len(waits.calls) == 4 and gate.status().forced_admissions == 1


def test_draining_releases_every_waiter() -> None:
    machine = Machine()
    waits = Waits(machine, on_wait=lambda calls: gate.begin_drain() if calls == 2 else None)
    gate = _deferring_gate(machine, waits)
    reservation = gate.reserve(stop=waits.stop)
    assert reservation is not None and reservation.forced and len(waits.calls) == 2


def test_fixed_gate_reserve_never_waits() -> None:
    machine = Machine(usage=999 * MB)
    gate = machine.gate(2)
    assert gate.reserve(stop=lambda: True) is not None


# -- the controller -----------------------------------------------------------------------------


def _busy(machine: Machine, gate: AdmissionGate, running: int, name: str = "t") -> List[Any]:
    reservations = []
    for _ in range(running):
        reservation = gate.try_reserve()
        assert reservation is not None
        reservation.start(name)
        reservations.append(reservation)
    return reservations


def test_ram_ceiling_collapses_the_limit_to_min_in_one_move() -> None:
    machine = Machine(usage=100 * MB)
    gate = machine.gate({"min": 2, "start": 6, "max": 8})
    machine.run_solo(gate, "t", 1 * MB)
    machine.usage = 860 * MB  # 86 % >= 85 %
    gate.tick()
    assert gate.limit == 2
    status = gate.status()
    assert status.last_adjust is not None
    assert (status.last_adjust.from_limit, status.last_adjust.to_limit, status.last_adjust.reason) == (
        6, 2, "ram_ceiling")
    assert status.gate == "deferring" and status.headroom_ticks == 0


def test_growth_needs_grow_headroom_ticks_consecutive_ticks_of_headroom() -> None:
    machine = Machine(usage=100 * MB)
    gate = machine.gate({"start": 2, "max": 8})
    machine.run_solo(gate, "t", 1 * MB)
    running = _busy(machine, gate, 2)
    for reservation in running:
        machine.now += 1.0
        reservation.finish()
    _busy(machine, gate, 2)  # saturated: 2 running of limit 2
    gate.tick()
    gate.tick()
    assert gate.limit == 2  # 2 ticks of headroom < 3
    gate._window.completions_this_tick = 1  # not a stall
    gate.tick()
    assert gate.limit == 3 and gate.status().last_adjust.reason == "grow"  # type: ignore[union-attr]


def test_headroom_counts_only_below_the_resume_mark() -> None:
    machine = Machine(usage=700 * MB)  # 70 %: under the ceiling, over resume 65 %
    gate = machine.gate({"start": 2, "max": 8})
    machine.run_solo(gate, "t", 1 * MB)
    _busy(machine, gate, 1)
    machine.usage = 700 * MB
    for _ in range(5):
        gate._window.completions_this_tick = 1
        gate.tick()
    assert gate.status().headroom_ticks == 0 and gate.limit == 2


def test_no_growth_unless_saturated() -> None:
    machine = Machine()
    gate = machine.gate({"start": 5, "max": 8})
    machine.run_solo(gate, "t", 1 * MB)
    _busy(machine, gate, 3)  # 3 < 0.8 * 5
    for _ in range(5):
        gate._window.completions_this_tick = 1
        gate.tick()
    assert gate.limit == 5


def test_gradient_below_0_7_shrinks_to_floor_of_limit_times_gradient() -> None:
    machine = Machine()
    gate = machine.gate({"start": 8, "max": 8})
    for seconds in (1.0, 1.0, 3.0, 3.0, 3.0):  # min 1, median 3: gradient 1/3
        machine.run_solo(gate, "t", 1 * MB, seconds=seconds)
    gate.tick()
    assert gate.limit == 2 and gate.status().last_adjust.reason == "shrink"  # type: ignore[union-attr]


def test_error_rate_above_0_2_is_backpressure() -> None:
    machine = Machine()
    gate = machine.gate({"start": 6, "max": 8})
    for ok in (True, True, False, True):  # 25 % errors
        machine.run_solo(gate, "t", 1 * MB, ok=ok)
    gate.tick()
    assert gate.limit == 5 and gate.status().last_adjust.reason == "backpressure"  # type: ignore[union-attr]


def test_two_stall_ticks_are_backpressure() -> None:
    machine = Machine()
    gate = machine.gate({"start": 6, "max": 8})
    machine.run_solo(gate, "t", 1 * MB)
    gate.tick()  # consumes the completion
    _busy(machine, gate, 1)
    gate.tick()
    assert gate.limit == 6  # one stall tick
    gate.tick()
    assert gate.limit == 5 and gate.status().last_adjust.reason == "backpressure"  # type: ignore[union-attr]


def test_cpu_ceiling_is_off_by_default_and_shrinks_by_one_when_set() -> None:
    machine = Machine()
    for knobs, expected in (({}, 6), ({"cpuCeilingPct": 80}, 5)):
        gate = machine.gate(dict({"start": 6, "max": 8}, **knobs))
        gate.tick()
        machine.now += 2.0
        machine.cpu += 1.8  # 90 % of one core
        gate.tick()
        assert gate.limit == expected
        assert gate.status().cpu_pct == pytest.approx(90.0)


def test_limits_are_clamped_to_min_and_max() -> None:
    machine = Machine()
    gate = machine.gate({"min": 3, "start": 3, "max": 3})
    for seconds in (1.0, 5.0, 5.0):
        machine.run_solo(gate, "t", 1 * MB, seconds=seconds)
    gate.tick()
    assert gate.limit == 3 and gate.status().last_adjust is None


def test_rtt_long_is_an_ewma_keeping_0_9_of_the_old_value() -> None:
    machine = Machine()
    gate = machine.gate({"start": 4, "max": 8})
    machine.run_solo(gate, "t", 1, seconds=2.0)
    assert gate._window.gradient() == 1.0
    assert gate._window.rtt_long == 2.0
    machine.run_solo(gate, "t", 1, seconds=1.0)
    gate._window.gradient()
    assert gate._window.rtt_long == pytest.approx(0.9 * 2.0 + 0.1 * 1.0)


# -- figures ----------------------------------------------------------------------------------


def test_status_wire_form_and_metrics() -> None:
    machine = Machine(usage=100 * MB)
    metrics = InMemoryMetrics()
    waits = Waits(machine, stop_after=1)
    gate = machine.gate({"start": 8, "max": 8}, metrics=metrics, tags={"task_kind": "activity", "task_queue": "q"},
                        event_factory=waits.event)
    machine.run_solo(gate, "report", 300 * MB)
    _busy(machine, gate, 2, "report")
    assert gate.reserve(stop=waits.stop) is None
    gate.tick()
    wire = gate.status().to_wire()
    assert wire["runtime"] == "python"
    assert wire["concurrency"] == {"mode": "adaptive", "limit": 8, "min": 1, "max": 8}
    assert wire["inFlight"] == 2 and wire["rssBytes"] == 100 * MB and wire["rssLimitBytes"] == CEILING
    assert wire["memory"]["source"] == "custom" and wire["memory"]["deferrals"] == 1
    assert wire["memory"]["stepCostBytes"] == {"report": 300 * MB}
    assert wire["memory"]["admitPct"] == 75.0 and wire["memory"]["resumePct"] == 65.0
    assert metrics.counter(ADMISSION_DEFERRALS, task_queue="q") == 1
    assert metrics.gauge_value(CONCURRENCY_LIMIT, task_queue="q") == 8
    assert metrics.gauge_value(MEMORY_USAGE, task_queue="q") == 100 * MB
    assert metrics.gauge_value(ADMISSION_DEFERRING, task_queue="q") in (0, 1)
    assert gate.available() in (0, 6)
    fixed = machine.gate(3).status().to_wire()
    assert "gate" not in fixed["memory"] and fixed["concurrency"]["mode"] == "fixed"


def test_a_finishing_task_wakes_a_waiter_at_once_on_real_threads() -> None:
    import threading
    import time

    machine = Machine(usage=100 * MB)
    gate = AdmissionGate(resolve_concurrency({"start": 1, "max": 1, "admissionPollMs": 10_000}),
                         probe=MemoryProbe(usage_reader=lambda: machine.usage, limit_reader=lambda: CEILING))
    running = gate.try_reserve()
    assert running is not None
    running.start("t")
    got: List[Any] = []
    waiter = threading.Thread(target=lambda: got.append(gate.reserve()))
    waiter.start()
    deadline = time.monotonic() + 5
    while gate.status().waiting != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    running.finish()
    waiter.join(5)
    assert got and got[0] is not None and time.monotonic() - started < 2  # not the 10 s poll


def test_wake_lets_a_stopping_caller_leave_at_once() -> None:
    import threading
    import time

    machine = Machine(usage=100 * MB)
    gate = AdmissionGate(resolve_concurrency({"start": 1, "max": 1, "admissionPollMs": 10_000}),
                         probe=MemoryProbe(usage_reader=lambda: machine.usage, limit_reader=lambda: CEILING))
    assert gate.try_reserve() is not None
    stopping = threading.Event()
    got: List[Any] = ["unset"]
    waiter = threading.Thread(target=lambda: got.__setitem__(0, gate.reserve(stop=stopping.is_set)))
    waiter.start()
    while gate.status().waiting != 1:
        time.sleep(0.01)
    started = time.monotonic()
    stopping.set()
    gate.wake()
    waiter.join(5)
    assert got[0] is None and time.monotonic() - started < 2


def test_readings_per_task_are_few_a_recent_one_is_reused() -> None:
    """The gate's CPU per task is a few file reads: a solo start reuses a reading <= 100 ms old,
    an idle admission reuses one <= admissionPollMs old; the brake and the projection read fresh."""
    machine = Machine(usage=100 * MB)
    reads: List[int] = []

    def usage() -> Optional[int]:
        reads.append(1)
        return machine.usage

    gate = AdmissionGate(resolve_concurrency({"start": 4, "max": 4}),
                         probe=MemoryProbe(usage_reader=usage, limit_reader=lambda: CEILING,
                                           peak_reader=lambda: machine.peak),
                         clock=lambda: machine.now)
    first = gate.try_reserve()  # nothing in flight, no reading yet: reads
    assert first is not None and len(reads) == 1
    first.start("t")  # reuses the admission reading
    assert len(reads) == 1
    first.finish()  # the finish reading (cost + idle baseline)
    assert len(reads) == 2
    second = gate.try_reserve()  # idle again: reuses the finish reading
    assert second is not None and len(reads) == 2
    second.start("t")
    third = gate.try_reserve()  # something runs: the projection reads fresh
    assert third is not None and len(reads) == 3
    machine.now += 1.0
    third.start("t")  # not solo: no baseline needed
    assert len(reads) == 3


@pytest.mark.parametrize("option, every_run", [(4, False), ({"start": 4, "max": 4}, True)])
def test_fixed_mode_measures_a_sample_of_solo_runs_the_memory_gate_every_one(option: Any, every_run: bool) -> None:
    """Where learned costs gate admission (adaptive, RAM admission on) every solo run is measured;
    in fixed mode they only inform status, so after a type's first 5 solo runs one in 16 is (each
    measurement is three or four procfs reads on the worker's hot path)."""
    from sync_worker.runtime.admission.gate import FIXED_MODE_SAMPLE_EVERY

    machine = Machine(usage=100 * MB)
    reads: List[int] = []

    def usage() -> Optional[int]:
        reads.append(1)
        return machine.usage

    gate = AdmissionGate(resolve_concurrency(option),
                         probe=MemoryProbe(usage_reader=usage, limit_reader=lambda: CEILING,
                                           peak_reader=lambda: machine.peak, peaks=machine.peaks()),
                         clock=lambda: machine.now)
    measured = []
    for run in range(1, 2 * FIXED_MODE_SAMPLE_EVERY + 1):
        before = len(reads)
        machine.now += 1.0  # no reading is recent enough to reuse
        machine.run_solo(gate, "t", cost=(50 if run == 2 * FIXED_MODE_SAMPLE_EVERY else 5) * MB)
        if len(reads) - before >= 2:  # a measured run reads at its start and at its finish
            measured.append(run)
    if every_run:
        assert measured == list(range(1, 2 * FIXED_MODE_SAMPLE_EVERY + 1))
    else:
        assert measured == [1, 2, 3, 4, 5, FIXED_MODE_SAMPLE_EVERY, 2 * FIXED_MODE_SAMPLE_EVERY]
    assert gate.status().step_cost_bytes["t"] >= 50 * MB  # the sampled big run was learned


class _RecordingEvent:
    """A stop event that records each wait's timeout and stops the loop after a few waits."""

    def __init__(self, stop_after: int) -> None:
        self.timeouts: List[float] = []
        self.stop_after = stop_after

    def wait(self, timeout: float) -> bool:
        self.timeouts.append(timeout)
        return len(self.timeouts) >= self.stop_after

    def set(self) -> None:
        pass


class _InlineBackend:
    """spawn runs the target at once (the loop ends by itself after its waits)."""

    def __init__(self, event: _RecordingEvent) -> None:
        self._event = event

    def event(self) -> _RecordingEvent:
        return self._event

    def spawn(self, name: str, target: Any) -> Any:
        target()
        return type("Done", (), {"join": lambda self, timeout=None: True})()


@pytest.mark.parametrize("option,idle_wait", [(4, 30.0), ("adaptive", 2.0)])
def test_control_loop_idles_quietly_only_for_a_fixed_limit(option: Any, idle_wait: float) -> None:
    """An idle fixed-limit worker ticks every 30 s (nothing to adjust); adaptive keeps tickMs."""
    from sync_worker.runtime.admission import start_control_loop

    machine = Machine()
    gate = machine.gate(option)
    event = _RecordingEvent(stop_after=2)
    start_control_loop(gate, _InlineBackend(event))
    assert event.timeouts == [idle_wait, idle_wait]
    busy = _RecordingEvent(stop_after=1)
    reservation = gate.try_reserve()
    assert reservation is not None
    reservation.start("t")
    start_control_loop(gate, _InlineBackend(busy))
    assert busy.timeouts == [2.0]  # work in flight: the configured tick
    reservation.finish()


def test_a_pollers_reservation_is_not_work_for_the_quiet_control_loop() -> None:
    """Every poller holds a slot for its long poll: an idle worker always has one reservation."""
    from sync_worker.runtime.admission import start_control_loop

    gate = Machine().gate(4)
    polling = gate.try_reserve()
    assert polling is not None and gate.reserved == 1 and gate.running == 0
    assert gate.idle()
    event = _RecordingEvent(stop_after=2)
    start_control_loop(gate, _InlineBackend(event))
    assert event.timeouts == [30.0, 30.0]
    polling.start("t")  # the poll leased a task: now it is work
    assert not gate.idle()
    polling.finish()
    assert gate.idle()


@pytest.mark.parametrize("option", [4, {"ramAdmission": False, "start": 4, "max": 4}])
def test_running_count_and_the_solo_run_are_kept_as_tasks_start_and_end(option: Any) -> None:
    machine = Machine()
    gate = machine.gate(option)
    first, second, poller = gate.try_reserve(), gate.try_reserve(), gate.try_reserve()
    assert first is not None and second is not None and poller is not None
    first.start("a")
    assert first.solo and gate.running == 1 and not gate.idle()
    second.start("b")
    assert not first.solo and not second.solo and gate.running == 2
    first.finish()
    first.finish()  # ending twice counts once
    third = gate.try_reserve()
    assert third is not None
    third.start("c")
    assert not third.solo and gate.running == 2  # "b" still runs: "c" does not run alone
    second.finish()
    third.finish()
    poller.release()  # a reservation that never started a task is not a running one
    assert gate.running == 0 and gate.reserved == 0 and gate.idle()
    fourth = gate.try_reserve()
    assert fourth is not None
    fourth.start("d")
    assert fourth.solo and gate.running == 1
    fourth.finish(ok=False)
    assert gate.running == 0 and gate.idle()
