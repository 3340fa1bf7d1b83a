"""``WorkerGroup``: several runtimes of one process run and stopped as one.

The one group behind every door that runs more than one runtime: ``manage.py durable_worker``
(one worker per task queue), ``sync-worker celery ... worker`` (one per queue), the embedded
workers of a web process (:class:`sync_worker.embed.EmbeddedWorkers` holds one). It gives the
members the ``run()`` / ``stop(cold=...)`` surface of one runtime, so
:func:`~sync_worker.host.serve` handles a group as it handles one worker:

* :meth:`WorkerGroup.run` runs every member until :meth:`~WorkerGroup.stop`, or until one
  fails, which stops the others (unless an ``on_failure`` handler takes the failure: the
  embedded workers restart the failed one instead);
* :meth:`~WorkerGroup.stop` stops every member at once, warm or ``cold`` (a cold request turns
  a running warm stop cold);
* what ended the run is raised once: the first hard error, else one :class:`ShutdownIncomplete`
  whose ``running`` lists every member's unfinished work.

Runners and stoppers are spawned through the members' concurrency backend: threads on the
threads pool, greenlets on gevent.
"""

from __future__ import annotations

import logging
from typing import Callable, Generic, List, Optional, Sequence, Tuple, TypeVar

from ..runtime.backend import ConcurrencyBackend, TaskHandle, backend_for_pool
from ..runtime.shell import ShutdownIncomplete
from ..runtime.status import WorkerState, WorkerStatus
from .protocols import Runtime

__all__ = ["WorkerGroup", "combined_error"]

logger = logging.getLogger("sync_worker.host")

R = TypeVar("R", bound=Runtime)

#: How long a member's stopper waits for its run to return once ``stop()`` came back.
_RUNNER_JOIN_SECONDS = 5.0
#: ``start_one_at_a_time``: the longest wait for one member to leave STARTING before the next starts.
_ONE_AT_A_TIME_SECONDS = 30.0
_ONE_AT_A_TIME_LOOK = 0.01


def combined_error(errors: Sequence[BaseException]) -> Optional[BaseException]:
    """One error for several members' outcomes: the first hard error, else one
    :class:`ShutdownIncomplete` naming every member's running work; None when there is none."""
    hard = [e for e in errors if not isinstance(e, ShutdownIncomplete)]
    if hard:
        return hard[0]
    if not errors:
        return None
    running = [name for e in errors if isinstance(e, ShutdownIncomplete) for name in e.running]
    return ShutdownIncomplete("; ".join(str(e) for e in errors), running)


class _Member(Generic[R]):
    """One runtime of the group and what became of it."""

    def __init__(self, runtime: R) -> None:
        self.runtime = runtime
        self.runner: Optional[TaskHandle] = None
        self.ended = False
        self.error: Optional[BaseException] = None
        self.stop_error: Optional[BaseException] = None


class WorkerGroup(Generic[R]):
    """Runtimes (all on one pool) run and stopped together; see the module docstring.

    ``on_failure(runtime, error)``: called (on the failed member's runner) when a member's run
    fails while no stop was requested; without it, the failure stops the whole group.
    ``on_stop_error(runtime, error)``: called when a member's ``stop()`` raised (it is kept for
    :meth:`stop` to raise as well). ``start_one_at_a_time``: start each member only once the
    previous left STARTING (registration reads workflow sources with ``ast``, which CPython
    3.11 cannot always do in two threads at once: gh-106905).
    """

    def __init__(
        self,
        runtimes: Sequence[R],
        *,
        backend: Optional[ConcurrencyBackend] = None,
        on_failure: Optional[Callable[[R, BaseException], None]] = None,
        on_stop_error: Optional[Callable[[R, BaseException], None]] = None,
        start_one_at_a_time: bool = False,
        name: str = "sync-worker",
    ) -> None:
        if not runtimes:
            raise ValueError("a WorkerGroup needs at least one worker")
        pools = sorted({runtime.pool for runtime in runtimes})
        if len(pools) > 1:
            raise ValueError(f"the runtimes of a WorkerGroup share one pool, not {' and '.join(pools)}")
        self._pool = pools[0]
        self._backend = backend if backend is not None else backend_for_pool(self._pool)
        self._lock = self._backend.native_lock()
        self._changed = self._backend.event()
        self._members: List[_Member[R]] = [_Member(runtime) for runtime in runtimes]
        self._on_failure = on_failure
        self._on_stop_error = on_stop_error
        self._one_at_a_time = start_one_at_a_time
        self._name = name
        self._started = False
        self._stop_requested = False
        self._cold_requested = False
        self._stoppers: List[TaskHandle] = []

    # -- what it holds ----------------------------------------------------------------------------

    @property
    def runtimes(self) -> List[R]:
        """The members, in order (a restarted member replaces the one it restarts)."""
        with self._lock:
            return [member.runtime for member in self._members]

    @property
    def workers(self) -> List[R]:
        """The members (the name the Django and Celery groups always had)."""
        return self.runtimes

    @property
    def pool(self) -> str:
        return self._pool

    @property
    def errors(self) -> List[BaseException]:
        """What the members' runs raised so far, in member order."""
        with self._lock:
            return [member.error for member in self._members if member.error is not None]

    @property
    def stopping(self) -> bool:
        """True once a stop was requested (by :meth:`stop`, :meth:`request_stop` or a failure)."""
        return self._stop_requested

    def status(self) -> Tuple[WorkerStatus, ...]:
        """Every member's status snapshot (no network I/O)."""
        return tuple(runtime.status() for runtime in self.runtimes)

    def alive(self) -> bool:
        """True while any member's run has not returned."""
        with self._lock:
            return any(m.runner is not None and not m.ended for m in self._members)

    # -- running ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start every member in the background (once; not after a stop was requested)."""
        with self._lock:
            if self._started or self._stop_requested:
                return
            self._started = True
            members = list(self._members)
        for member in members:
            with self._lock:
                if self._stop_requested:
                    return
                self._spawn_runner(member)
            if self._one_at_a_time:
                self._wait_started(member)

    def run(self) -> None:
        """Run every member until :meth:`stop` (or one fails, which stops the others); blocks.

        Raises the first hard error of the members' runs, else a :class:`ShutdownIncomplete`
        naming every member's running work, else returns.
        """
        self.start()
        while True:
            self._changed.clear()
            with self._lock:
                if all(m.ended or m.runner is None for m in self._members):
                    errors = [m.error for m in self._members if m.error is not None]
                    break
            self._changed.wait()
        error = combined_error(errors)
        if error is not None:
            raise error

    def add(self, runtime: R, *, replaces: Optional[R] = None) -> bool:
        """Add a member (started at once when the group runs), in place of ``replaces`` if given.

        False (nothing added) once a stop was requested.
        """
        if runtime.pool != self._pool:
            raise ValueError(f"the runtimes of a WorkerGroup share one pool: {runtime.pool!r} is not {self._pool!r}")
        with self._lock:
            if self._stop_requested:
                return False
            member = _Member(runtime)
            index = next((i for i, m in enumerate(self._members) if m.runtime is replaces), None)
            if replaces is not None and index is not None:
                self._members[index] = member
            else:
                self._members.append(member)
            if self._started:
                self._spawn_runner(member)
        self._changed.set()
        return True

    def _spawn_runner(self, member: _Member[R]) -> None:
        def run() -> None:
            try:
                member.runtime.run()
            except BaseException as error:
                member.error = error
            finally:
                member.ended = True
                self._member_ended(member)

        member.runner = self._backend.spawn(f"{self._name}-{_label(member.runtime)}", run)

    def _wait_started(self, member: _Member[R]) -> None:
        deadline = self._backend.monotonic() + _ONE_AT_A_TIME_SECONDS
        while (not member.ended and not self._stop_requested and self._backend.monotonic() < deadline
               and member.runtime.status().state is WorkerState.STARTING):
            self._backend.sleep(_ONE_AT_A_TIME_LOOK)

    def _member_ended(self, member: _Member[R]) -> None:
        error = member.error
        try:
            if error is None or isinstance(error, ShutdownIncomplete) or self._stop_requested:
                return
            if self._on_failure is not None:
                self._on_failure(member.runtime, error)
                return
            logger.error("a worker failed (%s); stopping the others", type(error).__name__)
            self.request_stop()
        finally:
            self._changed.set()

    # -- stopping ---------------------------------------------------------------------------------

    def request_stop(self, *, cold: bool = False) -> None:
        """Start stopping every member (warm, or ``cold``) and return at once.

        The first request stops every member; a later cold one turns a warm stop cold.
        """
        with self._lock:
            if self._stop_requested and (not cold or self._cold_requested):
                return
            self._stop_requested = True
            self._cold_requested = self._cold_requested or cold
            for member in self._members:
                self._stoppers.append(self._backend.spawn(f"{self._name}-stop-{_label(member.runtime)}",
                                                          self._stopper(member, cold)))
        self._changed.set()

    def _stopper(self, member: _Member[R], cold: bool) -> Callable[[], None]:
        def stop() -> None:
            try:
                member.runtime.stop(cold=cold)
            except BaseException as error:
                member.stop_error = error
                if self._on_stop_error is not None:
                    self._on_stop_error(member.runtime, error)
            if member.runner is not None:
                member.runner.join(_RUNNER_JOIN_SECONDS)

        return stop

    def wait_stopped(self, timeout: Optional[float] = None) -> bool:
        """Wait up to ``timeout`` seconds (None: no limit) for every stop to finish; True when they have."""
        deadline = None if timeout is None else self._backend.monotonic() + max(0.0, timeout)
        while True:
            with self._lock:
                pending = [stopper for stopper in self._stoppers if stopper.is_alive()]
            if not pending:
                return True
            for stopper in pending:
                remaining = None if deadline is None else max(0.0, deadline - self._backend.monotonic())
                if not stopper.join(remaining):
                    return False

    def join(self, timeout: Optional[float] = None) -> bool:
        """Wait up to ``timeout`` seconds (None: no limit) for every member's run to return; True when they have."""
        deadline = None if timeout is None else self._backend.monotonic() + max(0.0, timeout)
        with self._lock:
            runners = [m.runner for m in self._members if m.runner is not None]
        for runner in runners:
            remaining = None if deadline is None else max(0.0, deadline - self._backend.monotonic())
            if not runner.join(remaining):
                return False
        return True

    def stop(self, *, cold: bool = False) -> None:
        """Stop every member at once (warm, or ``cold``) and wait; raises what the stops raised
        (the first hard error, else one :class:`ShutdownIncomplete` for every unfinished drain)."""
        self.request_stop(cold=cold)
        self.wait_stopped()
        with self._lock:
            errors = [m.stop_error for m in self._members if m.stop_error is not None]
        error = combined_error(errors)
        if error is not None:
            raise error


def _label(runtime: Runtime) -> str:
    """A member's name in its tasks' names: its task queue when it has one, else its id."""
    queue = getattr(runtime, "task_queue", None)
    return str(queue) if queue else runtime.worker_id
