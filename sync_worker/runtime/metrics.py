"""A minimal metrics hook for the worker runtime.

The runtime records through a :class:`MetricsRecorder`; :class:`InMemoryMetrics` keeps
everything in process (tests, health pages) and :class:`NoopMetrics` is the default.
Names follow the published SDK (``durable_workflow_worker_polls`` and friends) so
dashboards keep working.

Poll outcomes: ``task``, ``empty``, ``error``, ``backpressure``. Task outcomes:
``completed``, ``failed``, ``failed_non_retryable``, ``cancelled``, ``no_handler``,
``decode_error``, ``complete_error``, ``claim_aborted``, ``abandoned``.

The activity slots' admission gate also sets gauges at every control tick (limit, in flight,
memory usage and ceiling, waiting, deferring) and counts deferrals; a recorder without a
``gauge`` method simply does not receive the gauges.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Deque, Dict, FrozenSet, List, Mapping, Optional, Protocol, Tuple

__all__ = [
    "POLLS",
    "POLL_DURATION",
    "TASKS",
    "TASK_DURATION",
    "CLIENT_REQUESTS",
    "CONCURRENCY_LIMIT",
    "CONCURRENCY_IN_FLIGHT",
    "MEMORY_USAGE",
    "MEMORY_LIMIT",
    "ADMISSION_WAITING",
    "ADMISSION_DEFERRING",
    "ADMISSION_DEFERRALS",
    "InMemoryMetrics",
    "MetricsRecorder",
    "NoopMetrics",
    "PollEvent",
]

POLLS = "durable_workflow_worker_polls"
POLL_DURATION = "durable_workflow_worker_poll_duration_seconds"
TASKS = "durable_workflow_worker_tasks"
TASK_DURATION = "durable_workflow_worker_task_duration_seconds"
CLIENT_REQUESTS = "durable_workflow_client_requests"
CONCURRENCY_LIMIT = "durable_workflow_worker_concurrency_limit"
CONCURRENCY_IN_FLIGHT = "durable_workflow_worker_concurrency_in_flight"
MEMORY_USAGE = "durable_workflow_worker_memory_usage_bytes"
MEMORY_LIMIT = "durable_workflow_worker_memory_limit_bytes"
ADMISSION_WAITING = "durable_workflow_worker_admission_waiting"
ADMISSION_DEFERRING = "durable_workflow_worker_admission_deferring"
ADMISSION_DEFERRALS = "durable_workflow_worker_admission_deferrals"

Tags = Mapping[str, str]
_Key = Tuple[str, FrozenSet[Tuple[str, str]]]


class MetricsRecorder(Protocol):
    def increment(self, name: str, value: float = 1.0, tags: Optional[Tags] = None) -> None: ...

    def record(self, name: str, value: float, tags: Optional[Tags] = None) -> None: ...


class NoopMetrics:
    def increment(self, name: str, value: float = 1.0, tags: Optional[Tags] = None) -> None:
        return None

    def record(self, name: str, value: float, tags: Optional[Tags] = None) -> None:
        return None

    def gauge(self, name: str, value: float, tags: Optional[Tags] = None) -> None:
        return None


class PollEvent:
    """One recorded poll: when it ended (monotonic), its kind and outcome."""

    __slots__ = ("at", "outcome", "task_kind")

    def __init__(self, at: float, task_kind: str, outcome: str) -> None:
        self.at = at
        self.task_kind = task_kind
        self.outcome = outcome

    def __repr__(self) -> str:
        return f"PollEvent(at={self.at:.3f}, task_kind={self.task_kind!r}, outcome={self.outcome!r})"


class InMemoryMetrics:
    """Counters and histograms keyed by name + tags, safe from any thread.

    It also keeps a time line of the latest poll outcomes (``poll_events``, at most
    ``max_poll_events``) so the back-off schedule can be observed from outside.
    """

    def __init__(self, *, max_poll_events: int = 10_000) -> None:
        self._lock = threading.Lock()
        self._counters: Dict[_Key, float] = {}
        self._histograms: Dict[_Key, List[float]] = {}
        self._gauges: Dict[_Key, float] = {}
        # Bounded: a long-running process keeps only the most recent polls.
        self.poll_events: Deque[PollEvent] = deque(maxlen=max_poll_events)

    @staticmethod
    def _key(name: str, tags: Optional[Tags]) -> _Key:
        return name, frozenset((tags or {}).items())

    def increment(self, name: str, value: float = 1.0, tags: Optional[Tags] = None) -> None:
        key = self._key(name, tags)
        with self._lock:
            self._counters[key] = self._counters.get(key, 0.0) + value
            if name == POLLS and tags is not None:
                self.poll_events.append(
                    PollEvent(time.monotonic(), tags.get("task_kind", ""), tags.get("outcome", ""))
                )

    def record(self, name: str, value: float, tags: Optional[Tags] = None) -> None:
        key = self._key(name, tags)
        with self._lock:
            self._histograms.setdefault(key, []).append(value)

    def gauge(self, name: str, value: float, tags: Optional[Tags] = None) -> None:
        with self._lock:
            self._gauges[self._key(name, tags)] = value

    def gauge_value(self, name: str, **tags: str) -> Optional[float]:
        """The last value of a gauge whose tags contain ``tags`` (None when never set)."""
        wanted = set(tags.items())
        with self._lock:
            for (n, t), v in self._gauges.items():
                if n == name and wanted <= t:
                    return v
        return None

    def counter(self, name: str, **tags: str) -> float:
        """Sum of a counter over every tag set that contains ``tags``."""
        wanted = set(tags.items())
        with self._lock:
            return sum(v for (n, t), v in self._counters.items() if n == name and wanted <= t)

    def histogram(self, name: str, **tags: str) -> List[float]:
        wanted = set(tags.items())
        with self._lock:
            values: List[float] = []
            for (n, t), v in self._histograms.items():
                if n == name and wanted <= t:
                    values.extend(v)
            return values

    def polls(self, task_kind: Optional[str] = None) -> List[PollEvent]:
        with self._lock:
            return [e for e in self.poll_events if task_kind is None or e.task_kind == task_kind]
