"""Policy objects a workflow passes with its commands (retry, parent-close, cancellation).

Names, fields and defaults follow the published SDK so existing workflow code keeps
working after the import line changes. ``ActivityRetryPolicy.to_dict()`` produces the
wire shape of protocol §4.5.1: ``{"max_attempts", "backoff_seconds", "non_retryable_error_types"}``
where ``backoff_seconds`` has ``max_attempts - 1`` entries, each
``ceil(min(initial * coefficient**i, maximum))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Mapping, Optional, Union

__all__ = [
    "ActivityRetryPolicy",
    "CancellationPolicy",
    "ChildWorkflowRetryPolicy",
    "ParentClosePolicy",
    "retry_policy_wire",
]


class CancellationPolicy(str, Enum):
    """What cancelling a run does to an operation it awaits (needs cooperative cancellation)."""

    TRY_CANCEL = "try_cancel"
    WAIT_CANCELLATION_COMPLETED = "wait_cancellation_completed"
    ABANDON = "abandon"


class ParentClosePolicy(str, Enum):
    """What happens to an open child run when its parent closes."""

    ABANDON = "abandon"
    REQUEST_CANCEL = "request_cancel"
    REQUEST_CANCELLATION = "request_cancellation"
    TERMINATE = "terminate"


@dataclass
class ActivityRetryPolicy:
    """Server-side retry budget of one scheduled activity (not an HTTP retry policy).

    Intervals may be fractional; each generated interval is capped by
    ``maximum_interval_seconds`` first and then rounded up to whole seconds, because the
    server stores integer seconds. An explicit ``backoff_seconds`` list is sent as given.
    """

    max_attempts: int = 3
    initial_interval_seconds: float = 1.0
    backoff_coefficient: float = 2.0
    maximum_interval_seconds: Optional[float] = None
    non_retryable_error_types: List[str] = field(default_factory=list)
    backoff_seconds: Optional[List[int]] = None

    def to_dict(self) -> Dict[str, Any]:
        """The wire shape of this policy; raises ``ValueError`` for impossible settings."""
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.initial_interval_seconds < 0:
            raise ValueError("initial_interval_seconds must be >= 0")
        if self.backoff_coefficient < 1:
            raise ValueError("backoff_coefficient must be >= 1")
        if self.maximum_interval_seconds is not None and self.maximum_interval_seconds < 0:
            raise ValueError("maximum_interval_seconds must be >= 0")
        return {
            "max_attempts": self.max_attempts,
            "backoff_seconds": self._intervals(),
            "non_retryable_error_types": [
                name.strip() for name in self.non_retryable_error_types if isinstance(name, str) and name.strip()
            ],
        }

    def _intervals(self) -> List[int]:
        if self.backoff_seconds is not None:
            return [max(0, int(seconds)) for seconds in self.backoff_seconds]
        intervals: List[int] = []
        for attempt in range(max(0, self.max_attempts - 1)):
            delay = self.initial_interval_seconds * self.backoff_coefficient**attempt
            if self.maximum_interval_seconds is not None:
                delay = min(delay, self.maximum_interval_seconds)
            intervals.append(max(0, math.ceil(delay)))
        return intervals


@dataclass
class ChildWorkflowRetryPolicy(ActivityRetryPolicy):
    """Server-side retry budget of one child workflow call (same fields and wire shape)."""


RetryPolicyInput = Union[ActivityRetryPolicy, Mapping[str, Any]]


def retry_policy_wire(policy: RetryPolicyInput) -> Dict[str, Any]:
    """A policy object's wire dict; a raw mapping passes through unchanged."""
    if isinstance(policy, ActivityRetryPolicy):
        return policy.to_dict()
    return dict(policy)


def canonical_policy(value: Any, enum: Any, what: str) -> Optional[str]:
    """The string value of a policy given as enum member or string; ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, Enum) and not isinstance(value, enum):
        raise ValueError(f"{what} must be a supported policy")
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a supported policy")
    try:
        return str(enum(value).value)
    except ValueError:
        raise ValueError(f"{what} must be a supported policy, not {value!r}") from None
