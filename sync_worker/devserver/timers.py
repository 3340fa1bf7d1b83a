"""The scheduler thread: fires timers, ends backoffs, expires leases and times out activities.

It wakes every ``tick_seconds`` (50 ms by default) and handles everything that is due, each item
in its own transaction so one bad row cannot stall the rest.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Optional, Tuple

from . import activities, schedules, sessions, tasks
from .engine import Engine
from .lifecycle import close_run
from .store import Row
from .util import TERMINAL_STATUSES, iso

log = logging.getLogger("sync_worker.devserver")


def _leased(engine: Engine, run: Row) -> bool:
    task = engine.store.get("wf_tasks", run["task_id"]) if run.get("task_id") else None
    return task is not None and task["state"] == "leased"


def fire_timer(engine: Engine, timer: Row) -> None:
    run = engine.get_run(timer["run_id"])
    if run is not None and timer.get("timer_kind") == "condition_timeout" and _leased(engine, run):
        # the leased task may be satisfying this very wait: decide after its completion
        timer["fire_at"] = engine.now() + engine.config.tick_seconds
        engine.store.put("timers", timer)
        return
    timer["state"] = "fired"
    engine.store.put("timers", timer)
    if run is None or run["status"] in TERMINAL_STATUSES:
        return
    if timer.get("timer_kind") in ("run_timeout", "execution_timeout"):
        _time_out_run(engine, run, timer)
        return
    payload = {"sequence": timer["sequence"], "timer_id": timer["timer_id"], "delay_seconds": timer["delay_seconds"],
               "fire_at": iso(timer["fire_at"]), "fired_at": iso(engine.now()), **timer.get("parallel", {})}
    if timer.get("timer_kind") == "condition_timeout":
        wait = run.get("open_wait") or {}
        if wait.get("condition_wait_id") != timer.get("condition_wait_id"):
            return  # the wait was satisfied or re-opened meanwhile
        payload.update({"timer_kind": "condition_timeout", "condition_wait_id": timer["condition_wait_id"],
                        "condition_key": timer.get("condition_key")})
        engine.append(run, "TimerFired", payload)
        run["open_wait"] = None
        engine.wake(run)
    else:
        engine.append(run, "TimerFired", payload)
        engine.member_resolved(run, timer.get("parallel", {}), timer["sequence"])
    engine.save_run(run)


def _time_out_run(engine: Engine, run: Row, timer: Row) -> None:
    kind = "run" if timer["timer_kind"] == "run_timeout" else "execution"
    message = f"workflow {kind} timeout of {run.get(f'{kind}_timeout_seconds')} s elapsed"
    run["failure"] = {"message": message, "exception_type": "WorkflowTimedOut"}
    close_run(engine, run, "failed", "WorkflowTimedOut",
              {"timeout_kind": timer["timer_kind"], "message": message, "deadline_at": iso(timer["fire_at"])},
              reason="timed_out")


class Scheduler:
    """Background thread driving every deadline; ``stop`` joins it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._stop = False
        self._wake = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="devserver-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def poke(self) -> None:
        """Tick now rather than at the next ``tick_seconds`` (the clock moved)."""
        self._wake.set()

    def _loop(self) -> None:
        while True:
            self._wake.wait(self.engine.config.tick_seconds)
            self._wake.clear()
            if self._stop:
                return
            try:
                self.tick()
            except Exception:  # keep the clock running; the failing item is logged
                log.exception("dev server scheduler tick failed")

    def tick(self) -> None:
        engine = self.engine
        ts = engine.now()
        with engine.lock:
            engine.store.flush()  # a batch a long poll left open (its answer waits for nothing in it)
            due_timers = engine.store.select("timers", "state = 'pending' AND fire_at <= ?", (ts,),
                                             order="fire_at", limit=200)
            due_tasks = engine.store.select("wf_tasks", "state IN ('delayed', 'leased') AND due_at <= ?", (ts,),
                                            limit=200)
            due_acts = engine.store.select("activities", "state IN ('ready', 'leased', 'backoff') AND due_at <= ?",
                                           (ts,), limit=200)
        for timer in due_timers:
            self._each("timers", timer["timer_id"], ("pending",), "fire_at", lambda row: fire_timer(engine, row))
        for task in due_tasks:
            self._each("wf_tasks", task["task_id"], ("delayed", "leased"), "due_at",
                       lambda row: tasks.on_due(engine, row))
        for act in due_acts:
            self._each("activities", act["execution_id"], ("ready", "leased", "backoff"), "due_at",
                       lambda row: activities.on_due(engine, row))
        self._fire_schedules(ts)
        try:
            sessions.sweep(engine)  # session leases: expiry, TTL, holders gone
        except Exception:
            log.exception("dev server could not sweep worker sessions")

    def _fire_schedules(self, ts: float) -> None:
        """Due schedules, each in its own transaction (a failing one is logged and retried next tick)."""
        engine = self.engine
        with engine.lock:
            keys = schedules.due(engine, ts)
        fired = False
        for key in keys:
            try:
                with engine.tx():
                    fired = schedules.on_due(engine, key) is not None or fired
            except Exception:
                log.exception("dev server could not fire schedule %s", key.replace("\0", "/"))
        if fired:
            engine.notify_everyone()

    def _each(self, table: str, key: str, states: Tuple[str, ...], due_key: str,
              action: Callable[[Row], None]) -> None:
        """Re-read the row inside the transaction: it may have changed since the scan."""
        engine = self.engine
        try:
            with engine.tx():
                row = engine.store.get(table, key)
                if row is None or row["state"] not in states or row.get(due_key) is None \
                        or row[due_key] > engine.now():
                    return
                action(row)
        except Exception:
            log.exception("dev server could not process due %s %s", table, key)
