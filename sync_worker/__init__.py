"""sync_worker: a synchronous, blocking-API worker for the Durable Workflow server.

Made for legacy apps (Django projects, WSGI processes, Celery-era code bases) that cannot
or should not run asyncio: pollers and activity slots run on plain threads or on gevent
greenlets. The public API is re-exported here; ``__all__`` is pinned by a test.
"""

from __future__ import annotations

__version__ = "0.1.0"

from . import errors, payloads
from .errors import (
    ActivityCancelled,
    ActivityFailed,
    ActivityLeaseAuthorityLost,
    ChildWorkflowCancelled,
    ChildWorkflowFailed,
    ChildWorkflowTerminated,
    DurableWorkflowError,
    FailureReportTooLarge,
    FatalError,
    NonDeterministicReplayError,
    NonRetryableError,
    PayloadError,
    QueryFailed,
    ServerError,
    SignalFailed,
    TransportError,
    Unauthorized,
    WorkflowAlreadyStarted,
    WorkflowCancelled,
    WorkflowFailed,
    WorkflowNotFound,
    WorkflowTerminated,
    WorkflowTimedOut,
)

__all__ = [
    "ActivityCancelled",
    "ActivityFailed",
    "ActivityLeaseAuthorityLost",
    "ChildWorkflowCancelled",
    "ChildWorkflowFailed",
    "ChildWorkflowTerminated",
    "DurableWorkflowError",
    "FailureReportTooLarge",
    "FatalError",
    "NonDeterministicReplayError",
    "NonRetryableError",
    "PayloadError",
    "QueryFailed",
    "ServerError",
    "SignalFailed",
    "TransportError",
    "Unauthorized",
    "WorkflowAlreadyStarted",
    "WorkflowCancelled",
    "WorkflowFailed",
    "WorkflowNotFound",
    "WorkflowTerminated",
    "WorkflowTimedOut",
    "__version__",
    "errors",
    "payloads",
]
