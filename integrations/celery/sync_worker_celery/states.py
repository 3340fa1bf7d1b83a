"""Task states, with Celery's names and precedence (``celery.states``)."""

from __future__ import annotations

__all__ = [
    "ALL_STATES", "EXCEPTION_STATES", "FAILURE", "IGNORED", "PENDING", "PROPAGATE_STATES", "READY_STATES",
    "RECEIVED", "REJECTED", "RETRY", "REVOKED", "STARTED", "SUCCESS", "UNREADY_STATES", "precedence",
]

PENDING = "PENDING"
RECEIVED = "RECEIVED"
STARTED = "STARTED"
SUCCESS = "SUCCESS"
FAILURE = "FAILURE"
REVOKED = "REVOKED"
REJECTED = "REJECTED"
RETRY = "RETRY"
IGNORED = "IGNORED"

READY_STATES = frozenset({SUCCESS, FAILURE, REVOKED})
UNREADY_STATES = frozenset({PENDING, RECEIVED, STARTED, REJECTED, RETRY})
EXCEPTION_STATES = frozenset({RETRY, FAILURE, REVOKED})
PROPAGATE_STATES = frozenset({FAILURE, REVOKED})
ALL_STATES = frozenset({PENDING, RECEIVED, STARTED, SUCCESS, FAILURE, RETRY, REVOKED})

_PRECEDENCE = [SUCCESS, FAILURE, None, REVOKED, STARTED, RECEIVED, REJECTED, RETRY, PENDING]


def precedence(state: str) -> int:
    """Lower is more final; unknown (custom) states sit where ``None`` is."""
    try:
        return _PRECEDENCE.index(state)
    except ValueError:
        return _PRECEDENCE.index(None)
