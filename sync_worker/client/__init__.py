"""``Client``: one blocking object that knows every server route the contract lists.

A drop-in for the published ``durable_workflow.sync.Client`` (2.12): the same methods,
parameter names, defaults and result dataclasses, importable from here under the same names
(``from sync_worker.client import Client, ScheduleSpec, ScheduleAction``). Control plane and
worker plane share one pooled, abortable transport. A ``Client`` is safe to share between
threads (and greenlets under gevent)::

    client = Client("http://127.0.0.1:7233", token="...", namespace="default")
    handle = client.start_workflow(workflow_type="greeter", task_queue="default",
                                   workflow_id="greet-1", input=["world"])
    print(handle.result(timeout=30))

The package has one module per route family: ``workflows``, ``messages`` (signal, query,
update), ``commands`` (cancel, terminate, repair, redrive, archive), ``activities``,
``schedules``, ``namespaces`` (and storage, search attributes), ``task_queues``, ``workers``,
``system``, ``bridge``, ``worker_plane``; ``handles`` and ``results`` hold what they return; ``transport``
is the only HTTP code.
"""

from __future__ import annotations

import dataclasses
import ssl
from typing import Any, Optional

from ..protocol.versions import CONTROL_PLANE_VERSION, MINIMUM_WORKER_PROTOCOL_VERSION
from .activities import ActivitiesMixin
from .base import (
    PROTOCOL_VERSION,
    SDK_VERSION,
)
from .bridge import BridgeMixin
from .commands import CommandsMixin
from .handles import ScheduleHandle, StandaloneActivityHandle, WorkflowHandle
from .messages import MessagesMixin
from .namespaces import NamespacesMixin
from .options import TransportRetryPolicy
from .results import (
    NamespaceDescription,
    NamespaceList,
    ScheduleAction,
    ScheduleBackfillResult,
    ScheduleDescription,
    ScheduleHistoryEvent,
    ScheduleHistoryPage,
    ScheduleList,
    ScheduleSpec,
    ScheduleTriggerResult,
    SearchAttributeList,
    StandaloneActivityExecution,
    StandaloneActivityList,
    StoragePayloadTestResult,
    StorageTestResult,
    TaskQueueAdmission,
    TaskQueueBuildIdCohort,
    TaskQueueBuildIdRollout,
    TaskQueueBuildIdRolloutState,
    TaskQueueDescription,
    TaskQueueList,
    TaskQueueQueryAdmission,
    TaskQueueTaskAdmission,
    WorkerDescription,
    WorkerList,
    WorkflowCommandResult,
    WorkflowExecution,
    WorkflowList,
    WorkflowRun,
    WorkflowRunList,
)
from .results.bridge import BridgeAdapterOutcome
from .schedules import SchedulesMixin
from .system import SystemMixin
from .task_queues import TaskQueuesMixin
from .worker_plane import WorkerPlane
from .workers import WorkersMixin
from .workflow_streams import WorkflowStreamsMixin
from .workflows import WorkflowsMixin

# the published facade's handle names
SyncWorkflowHandle = WorkflowHandle
SyncScheduleHandle = ScheduleHandle
SyncStandaloneActivityHandle = StandaloneActivityHandle

__all__ = [
    "CONTROL_PLANE_VERSION",
    "MINIMUM_WORKER_PROTOCOL_VERSION",
    "PROTOCOL_VERSION",
    "SDK_VERSION",
    "BridgeAdapterOutcome",
    "Client",
    "NamespaceDescription",
    "NamespaceList",
    "ScheduleAction",
    "ScheduleBackfillResult",
    "ScheduleDescription",
    "ScheduleHandle",
    "ScheduleHistoryEvent",
    "ScheduleHistoryPage",
    "ScheduleList",
    "ScheduleSpec",
    "ScheduleTriggerResult",
    "SearchAttributeList",
    "StandaloneActivityExecution",
    "StandaloneActivityHandle",
    "StandaloneActivityList",
    "StoragePayloadTestResult",
    "StorageTestResult",
    "SyncScheduleHandle",
    "SyncStandaloneActivityHandle",
    "SyncWorkflowHandle",
    "TaskQueueAdmission",
    "TaskQueueBuildIdCohort",
    "TaskQueueBuildIdRollout",
    "TaskQueueBuildIdRolloutState",
    "TaskQueueDescription",
    "TaskQueueList",
    "TaskQueueQueryAdmission",
    "TaskQueueTaskAdmission",
    "TransportRetryPolicy",
    "WorkerDescription",
    "WorkerList",
    "WorkflowCommandResult",
    "WorkflowExecution",
    "WorkflowHandle",
    "WorkflowList",
    "WorkflowRun",
    "WorkflowRunList",
]


class Client(
    WorkflowsMixin,
    MessagesMixin,
    WorkflowStreamsMixin,
    CommandsMixin,
    ActivitiesMixin,
    SchedulesMixin,
    NamespacesMixin,
    TaskQueuesMixin,
    WorkersMixin,
    SystemMixin,
    BridgeMixin,
    WorkerPlane,
):
    """Blocking client for the Durable Workflow server (control plane and worker plane).

    ``Client(base_url, *, token=None, control_token=None, worker_token=None, namespace="default",
    timeout=60.0, retry_policy=None, metrics=None, connect_timeout=10.0,
    failure_report_limit_bytes=None, max_connections=None, transport_retries=3, verify=True,
    max_body_bytes=64 MiB)``

    * ``base_url`` is the server origin (no ``/api``).
    * ``token`` authenticates both planes; ``control_token``/``worker_token`` override per plane.
    * ``retry_policy`` (the SDK's ``TransportRetryPolicy``, or anything with ``max_attempts``,
      ``initial_backoff_seconds``, ``max_backoff_seconds``) bounds transport retries of
      requests that are safe to repeat; ``transport_retries`` is the short form.
    * ``metrics`` is a recorder with ``increment``/``record`` (the SDK's ``MetricsRecorder``):
      every request counts ``durable_workflow_client_requests`` and times
      ``durable_workflow_client_request_duration_seconds``.
    * ``failure_report_limit_bytes`` lowers (never raises) the 1 MiB failure-report request budget.
    * ``max_connections`` sizes the connection pool: pollers plus slots (default 64).
    * ``max_body_bytes`` bounds a response body; a larger one raises ``ResponseTooLarge``
      without being read whole. Every HTTP attempt also has an absolute deadline
      (``connect_timeout`` + its read timeout) that dripped bytes do not extend.
    * ``worker_plane_transport``: worker-plane requests (polls, task outcomes, heartbeats) go on a
      pool of keep-alive sockets with a lean HTTP/1.1 wire, standard library only (``"stdlib"``,
      the default: about a third of the worker CPU per task of a requests session) or through a
      requests session (``"requests"``). Both share the
      deadlines, abort-on-shutdown, limits, TLS settings and error mapping.
    * ``control_plane_transport``: the same choice for control-plane and discovery requests
      (starts, describes, signals, results): ``"stdlib"`` (the default: the worker plane's socket
      pool, a fraction of the client CPU per call) or ``"requests"`` (a requests session, what
      ``responses``-based tests need to see the calls; the default until issue 29).
    * ``tls_context`` (an ``ssl.SSLContext``) is used as given for every HTTPS connection: its
      CAs, client certificate and hostname checks decide (requests' CA bundle is not added).
      ``verify=`` (a CA bundle path, or ``False``) is the short form.
    * ``external_storage`` (an ``ExternalStorageDriver``), ``external_storage_threshold_bytes`` and
      ``external_storage_cache`` (an ``ExternalPayloadCache``) are the SDK's: payloads whose blob is
      over the threshold are stored and travel as references; references in answers (results,
      describe, history) are fetched, verified by sha256 and decoded (docs/external-storage.md).
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: Optional[str] = None,
        control_token: Optional[str] = None,
        worker_token: Optional[str] = None,
        namespace: str = "default",
        timeout: float = 60.0,
        tls_context: Optional[ssl.SSLContext] = None,
        retry_policy: Any = None,
        metrics: Any = None,
        external_storage: Any = None,
        external_storage_threshold_bytes: Optional[int] = None,
        external_storage_cache: Any = None,
        connect_timeout: float = 10.0,
        failure_report_limit_bytes: Optional[int] = None,
        max_connections: Optional[int] = None,
        transport_retries: int = 3,
        verify: Any = True,
        max_body_bytes: int = 64 * 1024 * 1024,
        worker_plane_transport: str = "stdlib",
        control_plane_transport: str = "stdlib",
    ) -> None:
        if retry_policy is not None:
            transport_retries = int(getattr(retry_policy, "max_attempts", transport_retries))
        super().__init__(
            base_url, token=token, control_token=control_token, worker_token=worker_token, namespace=namespace,
            timeout=timeout, connect_timeout=connect_timeout, failure_report_limit_bytes=failure_report_limit_bytes,
            max_connections=max_connections, transport_retries=transport_retries, verify=verify, metrics=metrics,
            max_body_bytes=max_body_bytes, tls_context=tls_context,
            worker_plane_transport=worker_plane_transport, control_plane_transport=control_plane_transport,
            external_storage=external_storage,
            external_storage_threshold_bytes=external_storage_threshold_bytes,
            external_storage_cache=external_storage_cache,
        )
        self.retry_policy = retry_policy
        if retry_policy is not None:
            policy = self._transport.retry
            self._transport.retry = dataclasses.replace(
                policy, initial_backoff=float(getattr(retry_policy, "initial_backoff_seconds", policy.initial_backoff)),
                max_backoff=float(getattr(retry_policy, "max_backoff_seconds", policy.max_backoff)))

    def clone(self, **overrides: object) -> Client:
        overrides.setdefault("retry_policy", self.retry_policy)
        twin: Client = super().clone(**overrides)
        return twin
