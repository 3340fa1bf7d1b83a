"""The worker runtime: ``Worker``, pollers and back-off, slots, heartbeats, shutdown, status.

Everything concurrent goes through one :class:`~sync_worker.runtime.backend.ConcurrencyBackend`
chosen at start-up: plain threads, or greenlets with ``pool="gevent"`` (see docs/gevent.md).
"""

from __future__ import annotations

from ..runtime.admission import ConcurrencyStatus
from ..runtime.backend import ConcurrencyBackend, ThreadBackend
from ..runtime.metrics import InMemoryMetrics, MetricsRecorder, NoopMetrics
from ..runtime.status import DEFAULT_EVENT_LOOP_STALL_SECONDS, WorkerRoleStatus, WorkerState, WorkerStatus
from .deregistration import DeregistrationUnconfirmed
from .worker import ShutdownIncomplete, Worker

__all__ = [
    "DEFAULT_EVENT_LOOP_STALL_SECONDS",
    "ConcurrencyBackend",
    "ConcurrencyStatus",
    "DeregistrationUnconfirmed",
    "InMemoryMetrics",
    "MetricsRecorder",
    "NoopMetrics",
    "ShutdownIncomplete",
    "ThreadBackend",
    "Worker",
    "WorkerRoleStatus",
    "WorkerState",
    "WorkerStatus",
]
