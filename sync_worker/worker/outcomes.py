"""Delivering a task outcome (complete / fail) through a server outage.

An outcome that hits an outage is not dropped after the transport's sub-second retries: the
server would run the activity again later (a duplicated side effect). :func:`deliver` repeats it
with back-off for as long as the task's lease can still be valid — until ``lease_expires_at``
(plus a small grace for clock skew), or :data:`DEFAULT_RETRY_WINDOW_SECONDS` when the task did
not say — and logs a WARNING when it finally gives up. Only failures that say nothing about the
outcome are repeated (no response, 5xx, 429); a refusal (4xx: lease lost, attempt mismatch,
bad payload) ends it at once. Shutdown (the task's cancel token) interrupts the waits.
"""

from __future__ import annotations

import logging
import random
import time
from collections import abc  # isinstance against abc.Mapping: typing.Mapping's check is ~10x slower
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Callable, Optional, Tuple, TypeVar

from ..errors import PayloadError, ServerError, TransportError, WorkerShutdown

__all__ = ["DEFAULT_RETRY_WINDOW_SECONDS", "OutcomeAbandoned", "activity_outcome_deadline", "deliver", "lease_deadline",
           "retryable_outcome_error"]

logger = logging.getLogger("sync_worker.worker")

T = TypeVar("T")

#: How long an outcome is retried when the task carries no ``lease_expires_at``.
DEFAULT_RETRY_WINDOW_SECONDS = 60.0
#: Extra seconds past ``lease_expires_at`` (clocks of worker and server differ a little).
LEASE_GRACE_SECONDS = 2.0
_FIRST_DELAY = 0.25
#: Retries stay close together (at most a second apart): the lease is short, and an outcome
#: should land as soon as the server is back.
_MAX_DELAY = 1.0


class OutcomeAbandoned(Exception):
    """Raised by :func:`deliver` when the retry window closed; ``__cause__`` is the last error."""


def _instant(raw: Any) -> Optional[float]:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def lease_deadline(task: Mapping[str, Any], *, now: Callable[[], float] = time.time,
                   default_window: float = DEFAULT_RETRY_WINDOW_SECONDS) -> float:
    """Wall-clock seconds until which an outcome for ``task`` may still be accepted."""
    expires = _instant(task.get("lease_expires_at"))
    if expires is not None:
        return max(expires, now()) + LEASE_GRACE_SECONDS
    return now() + default_window


def _heartbeat_timeout(task: Mapping[str, Any], received_at: float) -> Optional[float]:
    """The attempt's heartbeat timeout in seconds: the real server snapshots it into the task's
    ``retry_policy.heartbeat_timeout`` (engine ``ActivityRetryPolicy::snapshotExternal``); failing
    that, the span from receipt to ``deadlines.heartbeat``."""
    policy = task.get("retry_policy")
    declared = policy.get("heartbeat_timeout") if isinstance(policy, abc.Mapping) else None
    if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
        return float(declared)
    deadlines = task.get("deadlines")
    at = _instant(deadlines.get("heartbeat")) if isinstance(deadlines, abc.Mapping) else None
    return max(0.0, at - received_at) if at is not None else None


def activity_outcome_deadline(task: Mapping[str, Any], *, received_at: float, last_heartbeat_at: Optional[float],
                              now: Callable[[], float] = time.time) -> Tuple[float, str]:
    """Until when an activity's outcome may still be accepted, and what ends it: the lease, or the
    heartbeat timeout counted from the attempt's last heartbeat (its receipt when none was sent),
    whichever comes first: the server times the attempt out then, whatever the lease says."""
    lease = lease_deadline(task, now=now)
    timeout = _heartbeat_timeout(task, received_at)
    if timeout is None:
        return lease, "its lease ends"
    expires = max((last_heartbeat_at or received_at) + timeout, now()) + LEASE_GRACE_SECONDS
    if expires < lease:
        return expires, f"its heartbeat timeout ({timeout:g} s) expires"
    return lease, "its lease ends"


def retryable_outcome_error(error: BaseException) -> bool:
    """Whether a failed outcome call may be repeated (the server said nothing about it)."""
    if isinstance(error, (WorkerShutdown, PayloadError)):
        return False
    if isinstance(error, TransportError):
        return True
    if isinstance(error, ServerError):
        return error.status >= 500 or error.status == 429
    return False


def deliver(send: Callable[[], T], *, what: str, deadline: float = 0.0, cancel: Any = None,
            now: Callable[[], float] = time.time, sleep: Optional[Callable[[float], None]] = None,
            until: str = "its lease ends", window: Optional[Callable[[float], Tuple[float, str]]] = None) -> T:
    """Call ``send`` until it succeeds, a non-retryable error (re-raised) or ``deadline``.

    ``window``, when given, replaces ``deadline`` and ``until``: it is called with the time of the
    first attempt, and only if that attempt fails with a retryable error (an outcome that lands at
    once, the common case, never works out its lease window).

    Raises :class:`OutcomeAbandoned` (logged at WARNING) when the window closes, and
    :class:`~sync_worker.errors.WorkerShutdown` when ``cancel`` fires during a wait.
    """
    attempts = 0
    started = now()
    delay = _FIRST_DELAY
    while True:
        attempts += 1
        try:
            return send()
        except Exception as error:
            if not retryable_outcome_error(error):
                raise
            if window is not None:
                deadline, until = window(started)
                window = None
            remaining = deadline - now()
            if remaining <= 0:
                logger.warning(
                    "%s abandoned after %d attempt(s) over %.1f s (%s): its lease can no longer be valid; "
                    "the server will time the task out and retry it", what, attempts, now() - started,
                    type(error).__name__)
                raise OutcomeAbandoned(what) from error
            if attempts == 1:
                logger.warning("%s failed (%s); retrying until %s in %.0f s", what,
                               type(error).__name__, until, remaining)
            wait = min(remaining, delay * random.uniform(0.75, 1.25))
            delay = min(_MAX_DELAY, delay * 2)
            if cancel is not None:
                if cancel.wait(wait):
                    raise WorkerShutdown(f"{what}: retry interrupted by shutdown") from error
            elif sleep is not None:
                sleep(wait)
            else:
                time.sleep(wait)
