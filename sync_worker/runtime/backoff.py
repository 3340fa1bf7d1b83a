"""Poll-failure back-off and warning throttling (protocol §9).

Each poller owns one :class:`PollFailureBackoff`. After a failed poll the delay is drawn
uniformly from ``[ceiling/2, ceiling]`` and the ceiling doubles up to 30 s; any successful
poll (an empty one included) resets it to 1 s. Warnings are throttled: an unchanged
failure summary is logged at most once a minute per poller. Summaries never contain
transport messages (they can hold URLs or credentials): only the exception class name,
the HTTP status and a bounded server ``reason``.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Callable, Optional

from ..errors import Forbidden, ServerError, TransportError, Unauthorized

__all__ = [
    "INITIAL_CEILING_SECONDS",
    "LOG_THROTTLE_SECONDS",
    "MAX_CEILING_SECONDS",
    "PollFailureBackoff",
    "looks_like_proxy_cut",
    "poll_error_summary",
]

logger = logging.getLogger("sync_worker.worker.poll")

INITIAL_CEILING_SECONDS = 1.0
MAX_CEILING_SECONDS = 30.0
LOG_THROTTLE_SECONDS = 60.0


def poll_error_summary(error: BaseException) -> str:
    """A credential-safe one-line description of a poll failure."""
    name = type(error).__name__
    if isinstance(error, Unauthorized) or (isinstance(error, ServerError) and error.status == 401):
        return f"{name}: authentication failed (HTTP 401); check the worker credentials"
    if isinstance(error, Forbidden) or (isinstance(error, ServerError) and error.status == 403):
        return f"{name}: authorization failed (HTTP 403); check the worker credentials and permissions"
    if not isinstance(error, ServerError):
        return name
    reason = error.reason()
    if not reason:
        return f"{name}: server returned {error.status}"
    return f"{name}: server returned {error.status} reason={reason[:64]!r}"


#: How close to a whole number of seconds a cut must be to look like a proxy timeout.
ROUND_CUT_TOLERANCE_SECONDS = 0.15


def looks_like_proxy_cut(error: BaseException, elapsed: float) -> bool:
    """A 502/504, or a transport loss (not a refused connection) at a round number of seconds."""
    if isinstance(error, ServerError):
        return error.status in (502, 504)
    if not isinstance(error, TransportError) or error.connect or getattr(error, "deadline_exceeded", False):
        return False
    nearest = round(elapsed)
    return nearest >= 2 and abs(elapsed - nearest) <= ROUND_CUT_TOLERANCE_SECONDS


class PollFailureBackoff:
    """One failure streak of one poller.

    ``rng`` and ``clock`` are injectable so the schedule can be tested without sleeping.
    """

    def __init__(
        self,
        task_kind: str,
        *,
        rng: Optional[Callable[[float, float], float]] = None,
        clock: Optional[Callable[[], float]] = None,
        log: Optional[logging.Logger] = None,
    ) -> None:
        self.task_kind = task_kind
        self._uniform = rng or random.uniform
        self._clock = clock or time.monotonic
        self._log = log or logger
        self.ceiling = INITIAL_CEILING_SECONDS
        self.consecutive_failures = 0
        self._last_summary: Optional[str] = None
        self._last_warning_at: Optional[float] = None
        self._last_cutoff_at: Optional[float] = None

    @property
    def route(self) -> str:
        return f"/worker/{self.task_kind}-tasks/poll"

    def reset(self) -> None:
        """A poll succeeded (a task or an empty answer): start the next streak from 1 s."""
        self.ceiling = INITIAL_CEILING_SECONDS
        self.consecutive_failures = 0
        self._last_summary = None
        self._last_warning_at = None
        self._last_cutoff_at = None

    def note_early_cutoff(self, error: BaseException, elapsed: float, wait_seconds: int) -> bool:
        """Warn when a proxy seems to have ended a long poll before its requested wait.

        Only a 502/504, or a connection cut at a round number of seconds (a proxy's idle
        timeout), looks like that; a refused connection or a reset at an arbitrary moment (a
        server restart) does not, and is reported by the ordinary poll-error warning alone. It
        says nothing about whether a task was delivered. Throttled like the failure warning;
        returns whether it was logged.
        """
        if wait_seconds <= 0 or elapsed >= wait_seconds or not looks_like_proxy_cut(error, elapsed):
            return False
        now = self._clock()
        if self._last_cutoff_at is not None and now - self._last_cutoff_at < LOG_THROTTLE_SECONDS:
            return False
        self._last_cutoff_at = now
        self._log.warning(
            "Worker long poll %s ended after %.2fs before its configured wait of %ds (%s). "
            "Check proxy and HTTP timeout budgets.",
            self.route, elapsed, wait_seconds, type(error).__name__,
        )
        return True

    def next_delay(self, error: BaseException, *, minimum_delay: float = 0.0) -> float:
        """Record a failed poll, maybe log it, and return how long to wait before the next."""
        ceiling = self.ceiling
        delay = max(minimum_delay, self._uniform(ceiling / 2.0, ceiling))
        self.ceiling = min(MAX_CEILING_SECONDS, ceiling * 2.0)
        self.consecutive_failures += 1
        summary = poll_error_summary(error)
        now = self._clock()
        if (
            summary != self._last_summary
            or self._last_warning_at is None
            or now - self._last_warning_at >= LOG_THROTTLE_SECONDS
        ):
            self._log.warning(
                "%s poll error: %s; route=%s; retrying in %.2f s",
                self.task_kind,
                summary,
                self.route,
                delay,
                extra={
                    "poll_task_kind": self.task_kind,
                    "poll_retry_delay": delay,
                    "poll_retry_ceiling": ceiling,
                },
            )
            self._last_summary = summary
            self._last_warning_at = now
        return delay
