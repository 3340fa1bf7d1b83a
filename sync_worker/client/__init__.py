"""``Client``: one blocking object that knows every server route the contract lists.

Control plane (workflows, standalone activities, worker records) and worker plane
(registration, polls, task outcomes, heartbeats) share one pooled, abortable transport.
A ``Client`` is safe to share between threads (and greenlets under gevent)::

    client = Client("http://127.0.0.1:7233", token="...", namespace="default")
    handle = client.start_workflow("greeter", "world", task_queue="default")
    print(handle.result(timeout=30))
"""

from __future__ import annotations

from .base import (
    CONTROL_PLANE_VERSION,
    MINIMUM_WORKER_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    SDK_VERSION,
)
from .control_plane import ControlPlane, WorkflowExecution, WorkflowHandle, WorkflowList
from .worker_plane import WorkerPlane

__all__ = [
    "CONTROL_PLANE_VERSION",
    "MINIMUM_WORKER_PROTOCOL_VERSION",
    "PROTOCOL_VERSION",
    "SDK_VERSION",
    "Client",
    "WorkflowExecution",
    "WorkflowHandle",
    "WorkflowList",
]


class Client(ControlPlane, WorkerPlane):
    """Blocking client for the Durable Workflow server (control plane and worker plane).

    ``Client(base_url, *, token=None, control_token=None, worker_token=None, namespace="default",
    timeout=60.0, connect_timeout=10.0, failure_report_limit_bytes=None, max_connections=None,
    transport_retries=3, verify=True)``

    * ``base_url`` is the server origin (no ``/api``).
    * ``token`` authenticates both planes; ``control_token``/``worker_token`` override per plane.
    * ``failure_report_limit_bytes`` lowers (never raises) the 1 MiB failure-report request budget.
    * ``max_connections`` sizes the connection pool: pollers plus slots (default 64).
    * ``transport_retries`` bounds retries of requests that are safe to repeat.
    """

    def clone(self, **overrides: object) -> Client:
        twin: Client = super().clone(**overrides)
        return twin
