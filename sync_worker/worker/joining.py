"""How a worker joins the server at start-up: discovery, the compatibility check, registration.

One attempt reads and checks the cluster info, decides what the worker advertises (fencing,
query tasks, the sticky queue, command contracts) and registers; :func:`register` retries
attempts through an unreachable or refusing server for ``max_startup_wait`` seconds (see
``startup.retry_startup``) and keeps the fenced registration token and the heartbeat interval the
server acknowledges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Tuple

from .registration import (
    registration_body,
    valid_registration_token,
    worker_capabilities,
    workflow_package_capabilities,
)
from .startup import retry_startup
from .sticky import check_sticky_support

if TYPE_CHECKING:  # pragma: no cover
    from .worker import Worker

__all__ = ["adopt_heartbeat_interval", "discover_and_register", "register"]


def register(worker: Worker) -> None:
    """Register (retrying through start-up failures); raises when the server never accepts."""
    tracker = worker._registration_role
    tracker.request_started()
    try:
        ack, fenced = retry_startup(
            lambda: discover_and_register(worker), url=str(getattr(worker.client, "base_url", "the server")),
            max_wait=worker.max_startup_wait, clock=worker.backend.monotonic, wait=worker._stop_requested.wait)
    except BaseException as error:
        tracker.request_failed(error)
        raise
    if fenced:
        token = valid_registration_token(ack if isinstance(ack, Mapping) else {}, worker.worker_id)
        if token is None:
            tracker.request_failed(RuntimeError())
            raise RuntimeError(f"worker {worker.worker_id}: invalid registration_token acknowledgement")
        worker._registration_token = token
    adopt_heartbeat_interval(worker, ack)
    tracker.request_succeeded()
    worker._board.registered()


def discover_and_register(worker: Worker) -> Tuple[Any, bool]:
    """One start-up attempt: read and check cluster info, then register; ``(ack, fenced)``."""
    client = worker.client
    client.validate_worker_compatibility(refresh=True)
    capabilities: Mapping[str, Any] = client.server_capabilities() or {}
    fencing = capabilities.get("worker_deregistration_fencing")
    fenced = fencing is True or (isinstance(fencing, Mapping) and fencing.get("supported") is True)
    worker._query_enabled = bool(worker.workflows) and capabilities.get("query_tasks") is True
    check_sticky_support(worker._sticky, capabilities)
    contracts = worker.workflows.command_contracts()
    sticky = worker._sticky.enabled
    body = registration_body(
        worker_id=worker.worker_id,
        task_queue=worker.task_queue,
        workflow_types=worker.workflows.names(),
        activity_types=list(worker.activities),
        fingerprints=worker.workflows.fingerprints(),
        command_contracts=contracts,
        capabilities=worker_capabilities(
            has_workflows=bool(worker.workflows), server_capabilities=capabilities,
            workflow_capabilities=workflow_package_capabilities(),
            has_updates=worker.workflows.has_updates(contracts), sticky=sticky,
        ),
        sticky=sticky,
        build_id=worker.build_id,
        max_concurrent_workflow_tasks=worker.max_concurrent_workflow_tasks,
        max_concurrent_activity_tasks=worker.max_concurrent_activity_tasks,
        task_slots=worker.task_slots(),
        process_metrics=worker._process_metrics_sample(),
    )
    return client.register_worker(body), fenced


def adopt_heartbeat_interval(worker: Worker, ack: Any) -> None:
    """Take the heartbeat interval the server acknowledged, when it gave a positive int."""
    if isinstance(ack, Mapping):
        advertised = ack.get("heartbeat_interval_seconds")
        if isinstance(advertised, int) and not isinstance(advertised, bool) and advertised > 0:
            worker.heartbeat_interval = float(advertised)
