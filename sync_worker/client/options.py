"""Client options named as in the published SDK."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransportRetryPolicy:
    """Transport retries of requests that are safe to repeat (``durable_workflow.TransportRetryPolicy``).

    ``Client(retry_policy=...)`` reads ``max_attempts``, ``initial_backoff_seconds`` and
    ``max_backoff_seconds``; the sleeps double each try (``backoff_multiplier`` 2) with ±25 %
    jitter. Durable retries of activities and workflows are a workflow's retry policy, not this.
    """

    max_attempts: int = 3
    initial_backoff_seconds: float = 0.1
    max_backoff_seconds: float = 5.0
    backoff_multiplier: float = 2.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.backoff_multiplier != 2.0 or not self.jitter:
            raise ValueError("sync_worker's transport doubles each backoff with jitter; "
                             "backoff_multiplier=2.0 and jitter=True are the only values")
