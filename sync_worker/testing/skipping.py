"""Time skipping: move a dev server's virtual clock to its next deadline while nothing is in flight.

The rule (Temporal's time-skipping test server has the same one): time jumps only when the
server is quiescent (``DevServer.busy_reason()`` is ``None``: no task leased or takeable by a
registered worker, no query waiting) *and* someone is waiting for time to pass:

* :meth:`TimeSkipper.sleep` — ``env.sleep(seconds)``: jump deadline by deadline up to the target,
  letting the workers finish what each deadline started, then settle;
* :meth:`TimeSkipper.unlocked` — while the environment's client waits for a workflow's result,
  a background thread jumps to each next deadline (``auto`` skipping), so ``handle.result()``
  of a workflow that sleeps for a month returns in milliseconds.

Outside those, the virtual clock runs at real speed: a test that starts a workflow and then sends
it a signal is not overtaken by a jump in between. Each jump fires what is due at once
(``DevServer.fire_due``) rather than at the scheduler's next tick; the engine's commit hook wakes
the waiters here, so nothing polls on a fixed period while work is moving.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Optional, Tuple

from ..devserver import DevServer
from ..devserver.clock import VirtualClock

log = logging.getLogger("sync_worker.testing")

__all__ = ["Changes", "SettleTimeout", "TimeSkipper"]

#: The longest a waiter sleeps without a commit before it looks again (a safety net only).
_RECHECK_SECONDS = 0.05


class SettleTimeout(TimeoutError):
    """Work stayed in flight longer than the environment's ``settle_timeout`` (its reason is named)."""


class Changes:
    """A counter bumped on each committed transaction of the server, with a wait for the next bump."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._count = 0

    @property
    def count(self) -> int:
        return self._count

    def bump(self) -> None:
        with self._cond:
            self._count += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> int:
        """Until the count moves past ``seen`` or ``timeout`` passes; returns the count."""
        with self._cond:
            if self._count == seen:
                self._cond.wait(timeout)
            return self._count


class TimeSkipper:
    """Drives ``clock`` (the server's :class:`VirtualClock`) forward; see the module docstring."""

    def __init__(self, server: DevServer, clock: VirtualClock, *, settle_timeout: float = 30.0) -> None:
        self.server = server
        self.clock = clock
        self.settle_timeout = settle_timeout
        self.changes = Changes()
        server.engine.on_commit = self.changes.bump
        self._moving = threading.RLock()  # one mover at a time: sleep() or the auto thread
        self._state = threading.Condition(threading.Lock())
        self._waiters = 0
        self._disabled = 0
        self._stopped = False
        self._thread = threading.Thread(target=self._auto, name="sync-worker-time-skipper", daemon=True)
        self._thread.start()

    # -- explicit ----------------------------------------------------------------------------
    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass, every deadline on the way handled in order."""
        if seconds < 0:
            raise ValueError("sleep() takes a duration of zero or more seconds")
        with self._moving:
            target = self.clock.time() + seconds
            while True:
                self.settle()
                moved = self._quiet_move(target)
                if moved is None:  # work arrived after the settle: settle again
                    continue
                jumped, reached = moved
                self._after_move(jumped)
                if reached:
                    break
            self.settle()

    def settle(self, timeout: Optional[float] = None) -> None:
        """Block until nothing is in flight; :class:`SettleTimeout` after ``timeout`` (default: the env's)."""
        limit = self.settle_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            seen = self.changes.count
            reason = self.server.busy_reason()
            if reason is None:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SettleTimeout(f"work still in flight after {limit:g} s of real time: {reason}")
            self.changes.wait(seen, min(remaining, _RECHECK_SECONDS))

    # -- automatic, while a result is awaited ------------------------------------------------------
    @contextmanager
    def unlocked(self) -> Iterator[None]:
        """Skip time automatically while the block runs (the client waits for a result in it)."""
        with self._state:
            self._waiters += 1
            self._state.notify_all()
        try:
            yield
        finally:
            with self._state:
                self._waiters -= 1

    @contextmanager
    def disabled(self) -> Iterator[None]:
        """No automatic skipping inside the block (``env.sleep`` still moves the clock)."""
        with self._state:
            self._disabled += 1
        try:
            yield
        finally:
            with self._state:
                self._disabled -= 1
                self._state.notify_all()

    def stop(self) -> None:
        with self._state:
            self._stopped = True
            self._state.notify_all()
        self.changes.bump()
        self._thread.join(5)
        try:
            self.server.engine.on_commit = None
        except RuntimeError:  # the server already stopped
            pass

    def _active(self) -> bool:
        with self._state:
            while not self._stopped and (self._waiters == 0 or self._disabled):
                self._state.wait(1.0)
            return not self._stopped

    def _auto(self) -> None:
        while self._active():
            seen = self.changes.count
            try:
                moved = self._step()
            except Exception:  # the server stopped under us, or a bug: log, keep the thread alive
                log.debug("time skipping step failed", exc_info=True)
                moved = False
            if not moved:
                self.changes.wait(seen, _RECHECK_SECONDS)

    def _step(self) -> bool:
        """One automatic move: when quiescent, jump to the next deadline and fire it. True if it changed anything."""
        with self._moving:
            seen = self.changes.count
            moved = self._quiet_move(None, auto=True)
            if moved is None or moved == (0.0, True):  # busy, no longer wanted, or no deadline
                return False
            self._after_move(moved[0])
            return self.changes.count != seen

    def _quiet_move(self, target: Optional[float], *, auto: bool = False) -> Optional[Tuple[float, bool]]:
        """When quiescent, move the clock to the next deadline, or to ``target`` when none comes before
        it (``None``: no target, stay); ``(seconds jumped, whether the target or no deadline was
        reached)``, or ``None`` when busy (``auto``: or no result is awaited any more).

        The look (wanted, quiescent, the next deadline) and the move are one step under the engine's
        lock: a start committed between a look and a move would be overtaken by it, its own deadlines
        included (a run's 90-day timeout fired while its first workflow task waited)."""
        with self.server.engine.lock:
            if (auto and not self._wanted()) or self.server.busy_reason() is not None:
                return None
            due = self.server.next_due()
            if due is None or (target is not None and due > target):
                return (self.clock.advance_to(target) if target is not None else 0.0), True
            return self.clock.advance_to(due), False

    def _wanted(self) -> bool:
        """Someone still waits for a result and skipping is not disabled."""
        with self._state:
            return not self._stopped and self._waiters > 0 and not self._disabled

    # -- one jump -------------------------------------------------------------------------------
    def _after_move(self, jumped: float) -> None:
        if jumped:
            log.debug("virtual clock jumped %.3f s", jumped)
        seen = self.changes.count
        self._fire()
        if self.changes.count == seen and not jumped:
            # Due already and firing changed nothing this instant: let the scheduler catch up.
            self.changes.wait(seen, _RECHECK_SECONDS)

    def _fire(self) -> None:
        self.server.fire_due()
