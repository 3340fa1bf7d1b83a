"""Readiness and liveness: ``Worker.status()`` snapshots.

The runtime records observations (request started/succeeded/failed per role, the
supervisor's progress tick, registration time) into a :class:`StatusBoard`; ``status()``
turns them into an immutable :class:`WorkerStatus` without any network I/O, from any
thread.

Ready: registered and RUNNING, every configured poller running, no failure since the
last success of any role, no outstanding request older than ``request_overdue_seconds``.
Live: the supervisor tick advanced within ``event_loop_stall_seconds``, no configured
poller exited, and no outstanding request older than ``request_stall_seconds``. Idle long
polls, outages within the retry budget and long activities keep a worker live. Draining
workers stay live but are not ready; stopped and failed workers are neither. Missing
observations are ``None``, never success.

Under a cooperative backend the event loop is the scheduler itself (the gevent hub): a
:class:`~sync_worker.runtime.backend.SchedulerMonitor` attached to the board measures how
long the hub has not run, and a hub blocked for longer than ``event_loop_stall_seconds``
makes the worker not live with a reason that says so. Locks here come from the backend's
``native_lock`` so a real OS thread can take a snapshot while the hub is stuck.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from .admission.status import ConcurrencyStatus

__all__ = [
    "DEFAULT_EVENT_LOOP_STALL_SECONDS",
    "RoleTracker",
    "StatusBoard",
    "WorkerRoleStatus",
    "WorkerState",
    "WorkerStatus",
    "default_request_bounds",
]

#: A scheduler monitor this late means its scheduler is not running right now.
_HUB_LATE_SECONDS = 0.25

#: A supervisor tick this much later than it was due makes the worker not live (the supervisor
#: says when its next tick is due), a wide margin for a slow, loaded machine.
DEFAULT_EVENT_LOOP_STALL_SECONDS = 30.0


def default_request_bounds(
    client_timeout: float, transport_attempts: int, poll_timeout: float, poll_timeout_seconds: int
) -> Tuple[float, float]:
    """(overdue, stall) defaults: one HTTP attempt deadline, and twice one request's retry budget.

    The attempt deadline is the larger of the client request timeout and the long poll's
    absolute HTTP deadline; the retry budget adds every attempt and the transport's
    longest jittered sleeps between them.
    """
    if poll_timeout_seconds > 0:
        poll_deadline = max(poll_timeout, poll_timeout_seconds + 5.0)
    else:
        poll_deadline = max(poll_timeout, 1.0)
    attempt = max(client_timeout, poll_deadline)
    attempts = max(1, transport_attempts)
    sleeps = sum(min(0.1 * 2 ** i, 5.0) * 1.25 for i in range(attempts - 1))
    return attempt, 2.0 * (attempts * attempt + sleeps)


class WorkerState(str, enum.Enum):
    """Lifecycle state of a Worker."""

    #: Constructed or registering; not yet admitted by the Server.
    STARTING = "starting"
    #: Registered with the Server; pollers and heartbeats are running.
    RUNNING = "running"
    #: stop() was requested; pollers stop and in-flight tasks drain.
    DRAINING = "draining"
    #: Shutdown completed and the registration was removed.
    STOPPED = "stopped"
    #: Registration was refused, a poller failed, or shutdown could not confirm cleanup.
    FAILED = "failed"


@dataclass(frozen=True)
class WorkerRoleStatus:
    """Progress of one configured worker role. Ages are local monotonic seconds."""

    role: str
    running: bool
    in_flight_seconds: Optional[float]
    last_success_age_seconds: Optional[float]
    last_failure_age_seconds: Optional[float]
    consecutive_failures: int
    last_failure_type: Optional[str]
    overdue: bool
    stalled: bool


@dataclass(frozen=True)
class WorkerStatus:
    """Point-in-time readiness and liveness: identity and progress only, no payloads or secrets."""

    worker_id: str
    namespace: str
    task_queue: str
    state: WorkerState
    ready: bool
    ready_reason: str
    live: bool
    live_reason: str
    registered_age_seconds: Optional[float]
    event_loop_progress_age_seconds: Optional[float]
    roles: Tuple[WorkerRoleStatus, ...]
    #: Activity slots: adaptive/fixed limit, memory and gate figures (None without activities).
    concurrency: Optional[ConcurrencyStatus] = None

    def role(self, name: str) -> Optional[WorkerRoleStatus]:
        for role in self.roles:
            if role.role == name:
                return role
        return None


class RoleTracker:
    """Observations of one role (a poller or the registration heartbeat).

    ``overdue_seconds`` is one HTTP attempt deadline of this role's requests and
    ``stall_seconds`` twice its complete transport retry budget; ``status()`` may
    override both.
    """

    def __init__(
        self,
        role: str,
        clock: Callable[[], float],
        *,
        overdue_seconds: float,
        stall_seconds: float,
        is_poller: bool,
        lock_factory: Optional[Callable[[], Any]] = None,
    ) -> None:
        self.role = role
        self.is_poller = is_poller
        self.overdue_seconds = overdue_seconds
        self.stall_seconds = stall_seconds
        self._clock = clock
        self._lock = (lock_factory or threading.Lock)()
        self._running = False
        self._exited = False
        # Start time of each request in flight, by token: a role may have several pollers.
        self._in_flight: Dict[int, float] = {}
        self._next_token = 0
        self._last_success: Optional[float] = None
        self._last_failure: Optional[float] = None
        self._failures = 0
        self._failure_type: Optional[str] = None

    def started(self) -> None:
        with self._lock:
            self._running = True

    def exited(self) -> None:
        with self._lock:
            self._running = False
            self._exited = True
            self._in_flight.clear()

    def request_started(self) -> int:
        """A request starts; pass the returned token to its outcome (several pollers share a role)."""
        with self._lock:
            self._next_token += 1
            self._in_flight[self._next_token] = self._clock()
            return self._next_token

    def requests_in_flight(self) -> int:
        """How many of this role's requests are open now (its pollers' long polls)."""
        with self._lock:
            return len(self._in_flight)

    def _request_ended(self, token: Optional[int]) -> None:
        if token is None:
            self._in_flight.clear()
        else:
            self._in_flight.pop(token, None)

    def request_succeeded(self, token: Optional[int] = None) -> None:
        with self._lock:
            self._request_ended(token)
            self._last_success = self._clock()
            self._failures = 0

    def request_failed(self, error: BaseException, token: Optional[int] = None) -> None:
        with self._lock:
            self._request_ended(token)
            self._last_failure = self._clock()
            self._failures += 1
            self._failure_type = type(error).__name__

    def request_abandoned(self, token: Optional[int] = None) -> None:
        """The request ended without an answer because the worker is stopping."""
        with self._lock:
            self._request_ended(token)

    @property
    def has_exited(self) -> bool:
        with self._lock:
            return self._exited

    def snapshot(
        self, now: float, overdue_seconds: Optional[float], stall_seconds: Optional[float]
    ) -> WorkerRoleStatus:
        overdue_bound = self.overdue_seconds if overdue_seconds is None else overdue_seconds
        stall_bound = self.stall_seconds if stall_seconds is None else stall_seconds
        with self._lock:
            oldest = min(self._in_flight.values()) if self._in_flight else None
            in_flight = None if oldest is None else max(0.0, now - oldest)
            return WorkerRoleStatus(
                role=self.role,
                running=self._running,
                in_flight_seconds=in_flight,
                last_success_age_seconds=_age(now, self._last_success),
                last_failure_age_seconds=_age(now, self._last_failure),
                consecutive_failures=self._failures,
                last_failure_type=self._failure_type,
                overdue=in_flight is not None and in_flight > overdue_bound,
                stalled=in_flight is not None and in_flight > stall_bound,
            )


def _age(now: float, at: Optional[float]) -> Optional[float]:
    return None if at is None else max(0.0, now - at)


class StatusBoard:
    """All status observations of one worker, readable from any thread."""

    def __init__(self, worker_id: str, namespace: str, task_queue: str, clock: Callable[[], float],
                 lock_factory: Optional[Callable[[], Any]] = None) -> None:
        self.worker_id = worker_id
        self.namespace = namespace
        self.task_queue = task_queue
        self.clock = clock
        self._lock = (lock_factory or threading.Lock)()
        self._monitor: Any = None
        self._state = WorkerState.STARTING
        self._registered_at: Optional[float] = None
        self._tick_at: Optional[float] = None
        self._next_tick_within = 0.0
        self._roles: Dict[str, RoleTracker] = {}
        self._starting_request: Optional[RoleTracker] = None

    # -- recording ---------------------------------------------------------------

    @property
    def state(self) -> WorkerState:
        with self._lock:
            return self._state

    def set_state(self, state: WorkerState) -> None:
        with self._lock:
            self._state = state

    def registered(self) -> None:
        with self._lock:
            self._registered_at = self.clock()

    def tick(self, next_within: float = 0.0) -> None:
        """The supervisor made progress and will tick again within ``next_within`` seconds.

        Liveness counts a stall from when the next tick was due, so a supervisor that sleeps
        long between ticks (cheap when idle) is not taken for a stalled one.
        """
        with self._lock:
            self._tick_at = self.clock()
            self._next_tick_within = max(0.0, next_within)

    def add_role(self, tracker: RoleTracker) -> RoleTracker:
        with self._lock:
            self._roles[tracker.role] = tracker
        return tracker

    def set_registration_tracker(self, tracker: RoleTracker) -> None:
        with self._lock:
            self._starting_request = tracker

    def set_scheduler_monitor(self, monitor: Any) -> None:
        """Attach a started scheduler monitor (or detach with None); see ``SchedulerMonitor``."""
        with self._lock:
            self._monitor = monitor

    def roles(self) -> List[RoleTracker]:
        with self._lock:
            return list(self._roles.values())

    # -- snapshot ------------------------------------------------------------------

    def snapshot(
        self,
        *,
        event_loop_stall_seconds: float = DEFAULT_EVENT_LOOP_STALL_SECONDS,
        request_overdue_seconds: Optional[float] = None,
        request_stall_seconds: Optional[float] = None,
    ) -> WorkerStatus:
        now = self.clock()
        with self._lock:
            state = self._state
            registered_at = self._registered_at
            tick_at = self._tick_at
            next_within = self._next_tick_within
            trackers = list(self._roles.values())
            starting = self._starting_request
            monitor = self._monitor
        roles = tuple(t.snapshot(now, request_overdue_seconds, request_stall_seconds) for t in trackers)
        pollers = {t.role for t in trackers if t.is_poller}
        tick_age = _age(now, tick_at)
        tick_lag = None if tick_age is None else max(0.0, tick_age - next_within)
        ready, ready_reason = _readiness(state, registered_at, roles, pollers)
        starting_role = (
            starting.snapshot(now, request_overdue_seconds, request_stall_seconds) if starting else None
        )
        live, live_reason = _liveness(
            state, tick_lag, event_loop_stall_seconds, roles, pollers, starting_role
        )
        if monitor is not None and state not in (WorkerState.STOPPED, WorkerState.FAILED):
            hub_reason = _hub_stall_reason(monitor, event_loop_stall_seconds, tick_age, live_reason)
            if hub_reason is not None:
                live, live_reason = False, hub_reason
            if tick_age is not None:
                tick_age = max(tick_age, float(monitor.tick_age()))
        return WorkerStatus(
            worker_id=self.worker_id,
            namespace=self.namespace,
            task_queue=self.task_queue,
            state=state,
            ready=ready,
            ready_reason=ready_reason,
            live=live,
            live_reason=live_reason,
            registered_age_seconds=_age(now, registered_at),
            event_loop_progress_age_seconds=tick_age,
            roles=roles,
        )


def _hub_stall_reason(monitor: Any, stall_seconds: float, tick_age: Optional[float],
                      live_reason: str) -> Optional[str]:
    """The scheduler's reason when it explains a stall; a blocked hub outranks every other reason."""
    blocked = float(monitor.overdue())
    if blocked > stall_seconds:
        return str(monitor.describe_stall(blocked))
    if live_reason != "event_loop_stalled":
        return None
    # The supervisor tick is stale: because the hub is not running right now, or because a block
    # that just ended has not let the supervisor tick again yet.
    if blocked > _HUB_LATE_SECONDS:
        return str(monitor.describe_stall(blocked))
    recent = monitor.recent_block_seconds(tick_age if tick_age is not None else stall_seconds)
    return None if recent is None else str(monitor.describe_stall(float(recent)))


#: A long poll sent after the role's last failure, unanswered for this long while the server
#: answered another role after that failure, is one the server accepted and is holding.
POLL_ACCEPTED_SECONDS = 0.5


def _poll_accepted(role: WorkerRoleStatus, latest_success_age: Optional[float]) -> bool:
    """Whether a failing poller's in-flight long poll counts as a successful exchange."""
    in_flight, failed_age = role.in_flight_seconds, role.last_failure_age_seconds
    if role.role not in ("workflow", "activity", "query") or in_flight is None or failed_age is None:
        return False
    return (POLL_ACCEPTED_SECONDS <= in_flight < failed_age and latest_success_age is not None
            and latest_success_age < failed_age)


def _readiness(
    state: WorkerState,
    registered_at: Optional[float],
    roles: Tuple[WorkerRoleStatus, ...],
    pollers: Set[str],
) -> Tuple[bool, str]:
    if state is not WorkerState.RUNNING:
        return False, state.value
    if registered_at is None:
        return False, "not_registered"
    for role in roles:
        if role.role in pollers and not role.running:
            return False, f"poller_not_running:{role.role}"
    latest_success = min((r.last_success_age_seconds for r in roles if r.last_success_age_seconds is not None),
                         default=None)
    for role in roles:
        if role.consecutive_failures > 0 and not _poll_accepted(role, latest_success):
            return False, f"last_exchange_failed:{role.role}"
    for role in roles:
        if role.overdue:
            return False, f"request_overdue:{role.role}"
    return True, "ready"


def _liveness(
    state: WorkerState,
    tick_age: Optional[float],
    stall_seconds: float,
    roles: Tuple[WorkerRoleStatus, ...],
    pollers: Set[str],
    starting: Optional[WorkerRoleStatus],
) -> Tuple[bool, str]:
    if state in (WorkerState.STOPPED, WorkerState.FAILED):
        return False, state.value
    if state is WorkerState.STARTING:
        # Before the supervisor exists, progress is the registration exchange itself.
        if starting is None or (starting.in_flight_seconds is None and starting.last_success_age_seconds
                                is None and starting.last_failure_age_seconds is None):
            return False, "not_started"
        if starting.stalled:
            return False, "request_stalled:registration"
        return True, "live"
    if tick_age is None:
        return False, "no_progress_observed"
    if tick_age > stall_seconds:
        return False, "event_loop_stalled"
    if state is WorkerState.RUNNING:
        for role in roles:
            if role.role in pollers and not role.running:
                return False, f"poller_exited:{role.role}"
    for role in roles:
        if role.stalled:
            return False, f"request_stalled:{role.role}"
    return True, "live"
