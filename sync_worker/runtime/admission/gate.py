"""The memory admission gate: "is there room to start one more task right now?"

A reusable component with no knowledge of the Durable Workflow ``Worker``: a caller reserves
a slot (:meth:`AdmissionGate.reserve`), marks it started with the task's type once it knows
it (:meth:`Reservation.start`), and finishes or releases it. A control loop calls
:meth:`AdmissionGate.tick` every ``tick_ms`` (:func:`start_control_loop` runs one on any
object with ``spawn``/``event``, i.e. a concurrency backend).

Admission rules, in order (adaptive mode):

1. running + reserved >= the live ``limit`` → wait (a limit collapse acts at once);
2. ``ram_admission`` off → admit;
3. nothing in flight → always admit and refresh the idle baseline (no self-deadlock);
4. usage or ceiling unreadable → admit (never gate on a number it does not have);
5. the first task of the process runs alone: until one task has finished and no cost has
   been learned, a second one waits (bounded by one finish, not by a timer);
6. projected = max(usage + cost(new), idle baseline + Σ cost(reserved) + cost(new)); admit
   while projected is at most ``ram_admit_pct`` of the ceiling, or ``ram_resume_pct`` once
   deferring (hysteresis). A refusal latches "deferring"; the latch opens when nothing is in
   flight, or when a tick sees usage at or below ``ram_resume_pct``.

A fixed-N gate never refuses (N is the caller's promise) but measures the same figures.
The gate defers and never rejects: a wait ends with a reservation — admitted, or forced
after ``admission_max_wait_ms`` (0 = never) or once draining — or with None when the
caller's ``stop()`` turns true. A waiter re-checks every ``admission_poll_ms`` and at once
when a reservation ends (or on :meth:`AdmissionGate.wake`). Each change of the gate state is
logged once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .. import metrics as names
from .config import ConcurrencyConfig
from .controller import LatencyWindow, decide
from .costs import COST_SAMPLES, CostLearner
from .memory import MemoryProbe, MemoryReading
from .peak import PeakWindow
from .status import ConcurrencyStatus, LimitAdjustment

__all__ = ["AdmissionGate", "ControlLoop", "Reservation", "start_control_loop"]

# A task that starts alone takes its cost baseline from a reading at most this old (usually the
# admission check just before its poll): one file read less per task.
_START_READING_MAX_AGE = 0.1

logger = logging.getLogger("sync_worker.runtime.admission")

_MIB = 1024.0 * 1024.0
#: In fixed mode, after a type's first COST_SAMPLES solo runs, one solo run in this many is measured.
FIXED_MODE_SAMPLE_EVERY = 16
#: Types whose solo runs are counted (a worker with more types samples the rest every time).
_MAX_SAMPLED_TYPES = 4096



class Reservation:
    """One admitted slot. ``start`` once the task (and its type) is known, then ``finish`` it;
    ``release`` a reservation that never started a task (an empty poll). Ending twice is a no-op."""

    __slots__ = (
        "_ended",
        "_gate",
        "forced",
        "growth",
        "name",
        "peak_window",
        "sampled",
        "solo",
        "started_at",
        "usage_at_start",
    )

    def __init__(self, gate: AdmissionGate, name: Optional[str], forced: bool) -> None:
        self._gate = gate
        self.name = name
        self.forced = forced
        self.started_at: Optional[float] = None
        self.solo = False
        self.sampled = False  # a solo run the gate measures (see AdmissionGate._sample_solo)
        self.usage_at_start: Optional[int] = None
        self.peak_window: Optional[PeakWindow] = None
        self.growth = 0
        self._ended = False

    @property
    def started(self) -> bool:
        return self.started_at is not None

    def start(self, name: Optional[str] = None) -> None:
        self._gate._start(self, name)

    def finish(self, ok: bool = True) -> None:
        self._gate._end(self, ok)

    def release(self) -> None:
        self._gate._end(self, True)


class AdmissionGate:
    """Slot admission, cost learning and the adaptive limit for one pool of tasks."""

    def __init__(
        self,
        config: ConcurrencyConfig,
        *,
        probe: Optional[MemoryProbe] = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        cpu_seconds: Optional[Callable[[], float]] = None,
        lock_factory: Callable[[], Any] = threading.Lock,
        event_factory: Callable[[], Any] = threading.Event,
        metrics: Any = None,
        tags: Optional[Mapping[str, str]] = None,
        name: str = "activity",
    ) -> None:
        self.config = config
        self.name = name
        self.limit = config.limit
        self.probe = probe if probe is not None else MemoryProbe(subtract_page_cache=config.subtract_page_cache)
        self._clock = clock
        self._wall = wall_clock
        self._cpu_seconds = cpu_seconds or _process_cpu_seconds
        self._lock = lock_factory()
        self._event_factory = event_factory
        self._waiters: List[Any] = []
        self._metrics = metrics
        self._tags = dict(tags or {})
        self._records: Dict[int, Reservation] = {}
        # Kept as reservations start and end (lock held), so no per-task scan of the records:
        # how many have started, and the one running alone (at most one: a second start ends it).
        self._started = 0
        self._solo_record: Optional[Reservation] = None
        self.fixed = not config.adaptive  # a fixed N: admission never refuses or waits (read-only)
        self._costs = CostLearner(config.step_cost_tracking)
        self._solo_runs: Dict[str, int] = {}  # per type: solo runs seen (fixed mode samples them)
        self._window = LatencyWindow()
        self._idle_usage: Optional[int] = None
        self._headroom_ticks = 0
        self._deferring = False
        self._waiting = 0
        self._deferrals = 0
        self._forced = 0
        self._last_deferred_at: Optional[int] = None
        self._probe_pending = True
        self._draining = False
        self._last_adjust: Optional[LimitAdjustment] = None
        # Log records decided under the lock, emitted after it is released: a log handler may
        # block (or yield, under gevent) and the lock may be an OS lock shared with greenlets.
        self._pending_logs: List[Tuple[int, str]] = []
        self._last: Optional[Tuple[float, MemoryReading]] = None
        self._cpu_pct: Optional[float] = None
        self._cpu_mark: Optional[Tuple[float, float]] = None

    # -- counts ------------------------------------------------------------------------------

    @property
    def running(self) -> int:
        with self._lock:
            return self._running_locked()

    @property
    def reserved(self) -> int:
        with self._lock:
            return len(self._records)

    @property
    def deferring(self) -> bool:
        with self._lock:
            return self._deferring

    def idle(self) -> bool:
        """No task running and nobody waiting for admission.

        A reservation that has not started a task is a poller's slot for its long poll (every
        poller holds one while it polls), not work: an idle worker always has one.
        """
        with self._lock:
            return not self._waiting and not self._started

    def _running_locked(self) -> int:
        return self._started

    # -- admission ---------------------------------------------------------------------------

    def try_reserve(self, name: Optional[str] = None) -> Optional[Reservation]:
        """A reservation when there is room right now, else None (``name`` None = type unknown yet)."""
        return self._try(name)[0]

    def _try(self, name: Optional[str]) -> Tuple[Optional[Reservation], str]:
        if self.fixed:  # rule-free: a fixed N is the caller's promise (only a tick queues logs)
            admitted = Reservation(self, name, False)
            with self._lock:
                self._records[id(admitted)] = admitted
            return admitted, "admit"
        config = self.config
        reading: Optional[MemoryReading] = None
        if config.adaptive:
            with self._lock:
                if len(self._records) >= self.limit:
                    return None, "limit"  # rule 1 needs no memory reading
                idle = not self._records
            if config.gated:
                # With nothing in flight the reading only refreshes the idle baseline: a recent one will do.
                reading = self._recent(config.admission_poll_ms / 1000.0) if idle else self._read()
        with self._lock:
            verdict = self._verdict(name, reading)
            reservation = self._admit(name, forced=False) if verdict == "admit" else None
        self._flush_logs()
        return reservation, verdict

    def _verdict(self, name: Optional[str], reading: Optional[MemoryReading]) -> str:
        """``admit``, ``limit`` (at the live limit) or ``memory`` (the gate defers). Lock held."""
        config = self.config
        if not config.adaptive:
            return "admit"
        if len(self._records) >= self.limit:
            return "limit"
        if not config.ram_admission:
            return "admit"
        usage = reading.usage_bytes if reading is not None else None
        if not self._records:
            if usage is not None:
                self._idle_usage = usage
            self._set_deferring(False, "nothing in flight")
            return "admit"
        ceiling = self.probe.limit()
        if usage is None or not ceiling:
            return "admit"
        if config.step_cost_tracking and self._probe_pending and not self._costs.learned:
            return "memory"  # the first task runs alone: one real measurement before two run
        new_cost = self._costs.estimate(name)
        projected = usage + new_cost
        if self._idle_usage is not None:
            reserved = sum(self._costs.estimate(r.name) for r in self._records.values()) + new_cost
            projected = max(projected, self._idle_usage + reserved)
        mark = config.ram_resume_pct if self._deferring else config.ram_admit_pct
        pct = 100.0 * projected / ceiling
        admitted = pct <= mark
        self._set_deferring(not admitted, f"projected {pct:.1f}% of {ceiling / _MIB:.0f} MiB "
                                          f"{'<=' if admitted else '>'} {mark:g}%")
        return "admit" if admitted else "memory"

    def _admit(self, name: Optional[str], forced: bool) -> Reservation:
        reservation = Reservation(self, name, forced)
        self._records[id(reservation)] = reservation
        if forced:
            self._forced += 1
        return reservation

    def reserve(self, name: Optional[str] = None, *,
                stop: Optional[Callable[[], bool]] = None) -> Optional[Reservation]:
        """Block until admitted; None only when ``stop()`` turns true (call :meth:`wake` to make a
        waiter look at it at once). A waiter re-checks every ``admission_poll_ms`` and at once when a
        reservation ends. After ``admission_max_wait_ms`` (when non-zero), or once draining, the
        reservation is granted anyway (``forced``): a memory shortage never fails a task."""
        reservation, verdict = self._try(name)
        if reservation is not None:
            return reservation
        config = self.config
        poll = config.admission_poll_ms / 1000.0
        deadline = self._clock() + config.admission_max_wait_ms / 1000.0 if config.admission_max_wait_ms else None
        memory_episode = False
        waiter = self._event_factory()
        with self._lock:
            self._waiting += 1
            self._waiters.append(waiter)
        try:
            while True:
                if verdict == "memory" and not memory_episode:
                    memory_episode = True  # one deferral per wait, however many re-checks it takes
                    with self._lock:
                        self._deferrals += 1
                        self._last_deferred_at = int(self._wall() * 1000)
                    self._count(names.ADMISSION_DEFERRALS)
                if stop is not None and stop():
                    return None
                if self._draining or (deadline is not None and self._clock() >= deadline):
                    if not self._draining:
                        logger.warning("%s admission: waited %d ms for memory; starting anyway",
                                       self.name, config.admission_max_wait_ms)
                    with self._lock:
                        return self._admit(name, forced=True)
                reservation, verdict = self._try(name)  # (again: a reservation may have ended meanwhile)
                if reservation is not None:
                    return reservation
                waiter.wait(poll)
                waiter.clear()
        finally:
            with self._lock:
                self._waiting -= 1
                self._waiters.remove(waiter)

    def wake(self) -> None:
        """Make every waiter re-check now (a reservation ended, draining began, a caller stops)."""
        with self._lock:
            waiters = list(self._waiters)
        for waiter in waiters:
            waiter.set()

    def begin_drain(self) -> None:
        """Shutting down: nobody waits at the gate any more (waiters get forced reservations)."""
        with self._lock:
            self._draining = True
        self.wake()

    def available(self) -> int:
        """Slots a caller may take now, for the heartbeat's ``activity_available`` (adaptive only)."""
        with self._lock:
            if self.config.gated and self._deferring:
                return 0
            return max(0, self.limit - len(self._records))

    # -- task lifecycle ----------------------------------------------------------------------

    def _start(self, reservation: Reservation, name: Optional[str]) -> None:
        track = self.config.step_cost_tracking
        with self._lock:
            if reservation._ended or reservation.started:
                return
            if name:
                reservation.name = name
            solo = self._solo_record
            if solo is not None:
                solo.solo = False  # its growth is no longer attributable to it alone
                self._solo_record = None
            reservation.solo = not self._started
            if reservation.solo:
                self._solo_record = reservation
            self._started += 1
            reservation.started_at = self._clock()
            reservation.sampled = reservation.solo and track and self._sample_solo(reservation.name)
        if reservation.sampled:
            peaks = self.probe.peaks
            window = peaks.open() if peaks is not None else None
            usage = self._recent(_START_READING_MAX_AGE).usage_bytes
            with self._lock:
                reservation.usage_at_start, reservation.peak_window = usage, window

    def _sample_solo(self, name: Optional[str]) -> bool:
        """Whether to measure this solo run (lock held). Where costs gate admission (adaptive mode
        with RAM admission) every solo run is; in fixed mode the learned costs only inform status
        pages, so after a type's first :data:`COST_SAMPLES` solo runs one in
        :data:`FIXED_MODE_SAMPLE_EVERY` is (each measurement reads procfs three or four times)."""
        if self.config.gated or not name:
            return True
        runs = self._solo_runs.get(name, 0) + 1
        if len(self._solo_runs) < _MAX_SAMPLED_TYPES or name in self._solo_runs:
            self._solo_runs[name] = runs
        return runs <= COST_SAMPLES or runs % FIXED_MODE_SAMPLE_EVERY == 0

    def _end(self, reservation: Reservation, ok: bool) -> None:
        # Only a sampled solo run learns a cost or has a peak window open (see _start).
        learn = reservation.sampled and reservation.solo and reservation.name and self.config.step_cost_tracking
        wanted = bool(learn)
        if not wanted and not self.fixed:
            with self._lock:  # the reading that ends a solo run is also the idle baseline, if it leaves none
                wanted = len(self._records) == 1 and id(reservation) in self._records
        usage = self._read().usage_bytes if wanted else None
        peak_growth = None
        if reservation.sampled:
            with self._lock:
                window, reservation.peak_window = reservation.peak_window, None
            peak_growth = self.probe.peaks.close(window) if window is not None and self.probe.peaks else None
        with self._lock:
            if reservation._ended:
                return
            reservation._ended = True
            self._records.pop(id(reservation), None)
            if reservation.started_at is not None:
                self._started -= 1
                if self._solo_record is reservation:
                    self._solo_record = None
                self._probe_pending = False
                now = self._clock()
                self._window.record(now, now - reservation.started_at, ok)
                if learn and reservation.solo and reservation.usage_at_start is not None:
                    sampled = reservation.growth
                    if usage is not None:
                        sampled = max(sampled, usage - reservation.usage_at_start)
                    # the peak window, where it is known, is exact whatever the readings missed;
                    # the readings still count (a cgroup also charges what the RSS does not show)
                    if peak_growth is not None:
                        observed, source = max(sampled, peak_growth), "process_peak"
                    else:
                        observed, source = sampled, "sampled"
                    assert reservation.name is not None
                    self._costs.observe(reservation.name, observed, source)
            if not self._records and usage is not None:
                self._idle_usage = usage
            # Wake the waiters (only an adaptive gate has any): one registered after this lock
            # re-checks before it waits, and sees this reservation gone.
            waiters = list(self._waiters) if self._waiters else None
        if waiters:
            for waiter in waiters:
                waiter.set()

    # -- control loop --------------------------------------------------------------------------

    def tick(self) -> None:
        """One control iteration: CPU and memory, cost sampling, headroom, then (adaptive) decide."""
        config = self.config
        cpu = self._measure_cpu()
        reading = self._read()
        usage = reading.usage_bytes
        ceiling = self.probe.limit()
        pct = 100.0 * usage / ceiling if usage is not None and ceiling else None
        with self._lock:
            self._cpu_pct = cpu
            if usage is not None and not self._records:
                self._idle_usage = usage
            if pct is None or pct <= config.ram_resume_pct:
                self._headroom_ticks += 1
                self._set_deferring(False, "usage at or below the resume mark" if pct is None else
                                    f"usage {pct:.1f}% <= {config.ram_resume_pct:g}%")
            else:
                self._headroom_ticks = 0
            running = self._running_locked()
            self._window.end_tick(running)
            if config.adaptive:
                decision = decide(config, self._window, limit=self.limit, usage_pct=pct, cpu_pct=cpu,
                                  running=running, headroom_ticks=self._headroom_ticks)
                if decision.reason == "ram_ceiling":
                    self._headroom_ticks = 0
                    if config.ram_admission:
                        self._set_deferring(True, f"usage {pct:.1f}% >= ceiling mark {config.ram_ceiling_pct:g}%")
                if decision.reason is not None and decision.limit != self.limit:
                    self._last_adjust = LimitAdjustment(int(self._wall() * 1000), self.limit, decision.limit,
                                                        decision.reason)
                    self._pending_logs.append((logging.INFO, f"{self.name} concurrency limit {self.limit} -> "
                                                                      f"{decision.limit} ({decision.reason})"))
                    self.limit = decision.limit
        self._flush_logs()
        self._export()

    def _set_deferring(self, deferring: bool, why: str) -> None:
        """Latch or release the gate (lock held); each change is logged once."""
        if deferring == self._deferring:
            return
        self._deferring = deferring
        if deferring:
            self._pending_logs.append((logging.WARNING, f"{self.name} admission gate deferring new tasks: {why}"))
        else:
            self._pending_logs.append((logging.INFO, f"{self.name} admission gate open: {why}"))

    def _flush_logs(self) -> None:
        if not self._pending_logs:
            return
        with self._lock:
            records, self._pending_logs = self._pending_logs, []
        for level, message in records:
            logger.log(level, "%s", message)

    def _measure_cpu(self) -> Optional[float]:
        now, cpu = self._clock(), self._cpu_seconds()
        previous, self._cpu_mark = self._cpu_mark, (now, cpu)
        if previous is None or now <= previous[0]:
            return None
        return max(0.0, 100.0 * (cpu - previous[1]) / (now - previous[0]))

    def _recent(self, max_age: float) -> MemoryReading:
        """The last reading when it is younger than ``max_age`` seconds, else a fresh one."""
        last = self._last
        if last is not None and self._clock() - last[0] <= max_age:
            return last[1]
        return self._read()

    def _read(self) -> MemoryReading:
        """Read usage; every reading (a tick, a waiting poller's re-check, a status read) also
        samples how far a task running alone has grown (allocate-and-free between two ticks is
        caught by the peak at finish)."""
        reading = self.probe.usage()
        usage = reading.usage_bytes
        if usage is not None and self.config.step_cost_tracking:
            with self._lock:
                for record in self._records.values():
                    if record.solo and record.usage_at_start is not None:
                        record.growth = max(record.growth, usage - record.usage_at_start)
        self._last = (self._clock(), reading)
        return reading

    # -- figures -------------------------------------------------------------------------------

    def status(self) -> ConcurrencyStatus:
        """The concurrency/memory block (reads memory files, no network I/O)."""
        reading = self._read()
        ceiling = self.probe.limit()
        config = self.config
        with self._lock:
            return ConcurrencyStatus(
                mode=config.mode, limit=self.limit, min=config.min, max=config.max,
                in_flight=self._running_locked(), reserved=len(self._records),
                memory_source=reading.source, usage_bytes=reading.usage_bytes, ceiling_bytes=ceiling,
                ceiling_source=self.probe.limit_source,
                usage_pct=(100.0 * reading.usage_bytes / ceiling
                           if reading.usage_bytes is not None and ceiling else None),
                idle_usage_bytes=self._idle_usage,
                gate=("deferring" if self._deferring else "open") if config.gated else "off",
                admit_pct=config.ram_admit_pct, resume_pct=config.ram_resume_pct,
                ceiling_pct=config.ram_ceiling_pct, waiting=self._waiting, deferrals=self._deferrals,
                forced_admissions=self._forced, last_deferred_at_ms=self._last_deferred_at,
                headroom_ticks=self._headroom_ticks, step_cost_bytes=self._costs.snapshot(),
                step_cost_sources=self._costs.sources(),
                last_adjust=self._last_adjust, cpu_pct=self._cpu_pct, p95_seconds=self._window.p95(),
                throughput_per_min=self._window.throughput_per_min(),
            )

    def _count(self, name: str) -> None:
        if self._metrics is not None:
            self._metrics.increment(name, 1.0, self._tags)

    def _export(self) -> None:
        gauge = getattr(self._metrics, "gauge", None)
        if not callable(gauge):
            return
        status = self.status()
        values = {names.CONCURRENCY_LIMIT: status.limit, names.CONCURRENCY_IN_FLIGHT: status.in_flight,
                  names.ADMISSION_WAITING: status.waiting,
                  names.ADMISSION_DEFERRING: 1 if status.gate == "deferring" else 0,
                  names.MEMORY_USAGE: status.usage_bytes, names.MEMORY_LIMIT: status.ceiling_bytes}
        for metric, value in values.items():
            if value is not None:
                gauge(metric, float(value), self._tags)


def _process_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


_QUIET_TICK_SECONDS = 30.0


class ControlLoop:
    """A running control loop; :meth:`stop` ends it (from any task)."""

    def __init__(self, gate: AdmissionGate, backend: Any) -> None:
        self._gate = gate
        self._stop = backend.event()
        self.handle = backend.spawn(f"sync-worker-{gate.name}-concurrency", self._run)

    def _run(self) -> None:
        config = self._gate.config
        interval = config.tick_ms / 1000.0
        # A fixed limit is never gated or adjusted: its ticks only refresh figures (status() reads
        # memory fresh anyway), so an idle fixed-limit worker ticks rarely; every wakeup costs an
        # idle process CPU (bench/idle_cpu.py).
        quiet = max(interval, _QUIET_TICK_SECONDS) if not (config.adaptive or config.gated) else interval
        while not self._stop.wait(quiet if self._gate.idle() else interval):
            try:
                self._gate.tick()
            except Exception:  # a control hiccup must never take the worker down
                logger.exception("%s concurrency control tick failed", self._gate.name)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.handle.join(timeout)


def start_control_loop(gate: AdmissionGate, backend: Any) -> ControlLoop:
    """Tick ``gate`` every ``tick_ms`` on a task of ``backend`` (threads, gevent, or anything with
    ``spawn(name, target)`` and ``event()``)."""
    gate.tick()  # a first CPU mark and memory reading right away
    return ControlLoop(gate, backend)
