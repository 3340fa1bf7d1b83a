"""sync_worker: a synchronous, blocking-API worker for the Durable Workflow server.

Made for legacy apps (Django projects, WSGI processes, Celery-era code bases) that cannot
or should not run asyncio: pollers and activity slots run on plain threads or on gevent
greenlets. The public API is re-exported here; ``__all__`` is pinned by a test.

Importing ``sync_worker`` is deliberately light (stdlib only): the heavy names (``Client``,
``Worker``, ``workflow``, ``activity``) load on first use, so a gevent launcher can import
this package and still monkey-patch before ``requests``, ``ssl`` or ``threading`` users load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import errors, payloads
from ._sdk_names import SDK_NAMES
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
    ResponseTooLarge,
    ResultNotEncodable,
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

__version__ = "0.1.0"

# name -> (module, attribute or None for the module itself), imported on first access
_LAZY = {
    "Client": ("sync_worker.client", "Client"),
    "WorkflowHandle": ("sync_worker.client", "WorkflowHandle"),
    "WorkflowExecution": ("sync_worker.client", "WorkflowExecution"),
    "CancelToken": ("sync_worker.cancel", "CancelToken"),
    "Worker": ("sync_worker.worker", "Worker"),
    "WorkerStatus": ("sync_worker.worker", "WorkerStatus"),
    "WorkerRoleStatus": ("sync_worker.worker", "WorkerRoleStatus"),
    "WorkerState": ("sync_worker.worker", "WorkerState"),
    "InMemoryMetrics": ("sync_worker.worker", "InMemoryMetrics"),
    "WorkerInterceptor": ("sync_worker.interceptors", "WorkerInterceptor"),
    "PassthroughWorkerInterceptor": ("sync_worker.interceptors", "PassthroughWorkerInterceptor"),
    "ActivityInterceptorContext": ("sync_worker.interceptors", "ActivityInterceptorContext"),
    "activity": ("sync_worker.activity", None),
    "workflow": ("sync_worker.workflow", None),
}
_LAZY.update(SDK_NAMES)  # every other name of the published SDK that we provide (sync_worker/_sdk_names.py)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from . import activity, workflow
    from .cancel import CancelToken
    from .client import Client, WorkflowExecution, WorkflowHandle
    from .interceptors import ActivityInterceptorContext, PassthroughWorkerInterceptor, WorkerInterceptor
    from .worker import InMemoryMetrics, Worker, WorkerRoleStatus, WorkerState, WorkerStatus


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'sync_worker' has no attribute {name!r}")
    module = importlib.import_module(target[0])
    value = module if target[1] is None else getattr(module, target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ActivityCancelled",
    "ActivityFailed",
    "ActivityInterceptorContext",
    "ActivityLeaseAuthorityLost",
    "CancelToken",
    "ChildWorkflowCancelled",
    "ChildWorkflowFailed",
    "ChildWorkflowTerminated",
    "Client",
    "DurableWorkflowError",
    "FailureReportTooLarge",
    "FatalError",
    "InMemoryMetrics",
    "NonDeterministicReplayError",
    "NonRetryableError",
    "PassthroughWorkerInterceptor",
    "PayloadError",
    "QueryFailed",
    "ServerError",
    "SignalFailed",
    "TransportError",
    "ResponseTooLarge",
    "ResultNotEncodable",
    "Unauthorized",
    "Worker",
    "WorkerInterceptor",
    "WorkerRoleStatus",
    "WorkerState",
    "WorkerStatus",
    "WorkflowAlreadyStarted",
    "WorkflowCancelled",
    "WorkflowExecution",
    "WorkflowFailed",
    "WorkflowHandle",
    "WorkflowNotFound",
    "WorkflowTerminated",
    "WorkflowTimedOut",
    "__version__",
    "activity",
    "errors",
    "payloads",
    "workflow",
    *sorted(set(SDK_NAMES) - {"client", "external_storage", "interceptors", "testing", "worker",
                                    "worker_session"}),
]
