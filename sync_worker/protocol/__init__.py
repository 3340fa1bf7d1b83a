"""The wire, typed: versions, routes and reasons shared by the client and the dev server, polled
tasks parsed once into frozen dataclasses, and the ``WorkerPlane`` protocol the runtime uses."""

from __future__ import annotations

from . import reasons, routes
from .tasks import (
    ActivityTask,
    MalformedTask,
    PolledTask,
    QueryTask,
    UpdateValidationTask,
    WorkflowTask,
    parse_task,
)
from .versions import (
    CONTROL_PLANE_VERSION,
    MINIMUM_WORKER_PROTOCOL_VERSION,
    WORKER_PROTOCOL_VERSION,
)
from .worker_plane import WorkerPlane

__all__ = [
    "CONTROL_PLANE_VERSION",
    "MINIMUM_WORKER_PROTOCOL_VERSION",
    "WORKER_PROTOCOL_VERSION",
    "ActivityTask",
    "MalformedTask",
    "PolledTask",
    "QueryTask",
    "UpdateValidationTask",
    "WorkerPlane",
    "WorkflowTask",
    "parse_task",
    "reasons",
    "routes",
]
