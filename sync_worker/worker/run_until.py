"""``Worker.run_until``: waiting for one workflow to reach a terminal state."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Callable

from ..errors import ServerUnavailable, TransportError, WorkerShutdown
from ..failure_reports import task_failure_note
from ..runtime.backend import EventLike

__all__ = ["TERMINAL_STATUSES", "wait_until_terminal"]

logger = logging.getLogger("sync_worker.worker")

TERMINAL_STATUSES = frozenset({"completed", "failed", "terminated", "canceled", "cancelled"})


def wait_until_terminal(
    client: Any,
    workflow_id: str,
    *,
    deadline: float,
    timeout: float,
    poll_interval: float,
    clock: Callable[[], float],
    stopped: EventLike,
    worker_id: str,
) -> Any:
    """Describe the workflow until it is terminal (returns the description) or time is up.

    Transient server trouble is retried until the deadline; a stop ends the wait with
    :class:`WorkerShutdown`; the deadline with :class:`TimeoutError` (the run is untouched).
    """
    while True:
        if stopped.is_set():
            raise WorkerShutdown(f"worker {worker_id} stopped before workflow {workflow_id} finished")
        try:
            description = client.describe_workflow(workflow_id)
        except (TransportError, ServerUnavailable) as error:
            logger.warning("describe_workflow(%s) failed: %s", workflow_id, type(error).__name__)
            description = None
        status = getattr(description, "status", None)
        if status is None and isinstance(description, Mapping):
            status = description.get("status")
        if isinstance(status, str) and status.lower() in TERMINAL_STATUSES:
            return description
        if clock() >= deadline:
            raw = getattr(description, "raw", description)
            note = task_failure_note(raw) if isinstance(raw, Mapping) else ""
            raise TimeoutError(f"workflow {workflow_id} not terminal after {timeout}s (status={status}){note}")
        stopped.wait(min(poll_interval, max(0.0, deadline - clock())))
