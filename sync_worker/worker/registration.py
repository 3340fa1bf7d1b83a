"""Registration and heartbeat bodies (§3.1, §3.2) with honest capabilities.

Only what this runtime really implements is advertised: ``worker_sessions`` (always, as the
SDK; ``sync_worker.worker.sessions``); ``update_validation_tasks`` when a workflow declares a
validator; ``sticky_execution`` only when the sticky cache is enabled. Workflow command
capabilities come from the workflow package (``sync_worker.workflow.WORKFLOW_CAPABILITIES``
when it declares them);
``query_tasks`` is added when the server advertises it and the worker has workflows, and
``workflow_updates`` when a workflow declares ``@workflow.update`` handlers (the replayer
applies them).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from .. import __version__

__all__ = [
    "REGISTRATION_TOKEN_LENGTH",
    "SDK_VERSION",
    "ProcessMetrics",
    "capability_manifest",
    "registration_body",
    "valid_registration_token",
    "worker_capabilities",
]

SDK_VERSION = f"sync-worker-python/{__version__}"
REGISTRATION_TOKEN_LENGTH = 32


def workflow_package_capabilities() -> List[str]:
    """Capabilities the workflow replayer declares it implements (none if it declares none)."""
    try:
        from .. import workflow as workflow_package
    except ImportError:  # pragma: no cover - the package is part of the distribution
        return []
    declared = getattr(workflow_package, "WORKFLOW_CAPABILITIES", ())
    return [str(c) for c in declared if isinstance(c, str)]


def worker_capabilities(
    *,
    has_workflows: bool,
    server_capabilities: Mapping[str, Any],
    workflow_capabilities: Iterable[str] = (),
    has_updates: bool = False,
    sticky: bool = False,
    has_validators: bool = False,
) -> List[str]:
    """The ``capabilities`` list of the registration, in the published SDK's order."""
    capabilities: List[str] = []
    if has_workflows:
        for capability in workflow_capabilities:
            if capability not in capabilities:
                capabilities.append(capability)
        if server_capabilities.get("query_tasks") is True:
            capabilities.append("query_tasks")
        if has_validators:
            capabilities.append("update_validation_tasks")
        if has_updates and "workflow_updates" not in capabilities:
            capabilities.append("workflow_updates")
        # Workflows here can consume durable message streams (ctx.message_stream).
        capabilities.append("message_streams")
    # Session leases are held by the activity side as much as the workflow side: always (§3.1 item 11).
    capabilities.append("worker_sessions")
    if has_workflows and sticky:
        capabilities.append("sticky_execution")
    return capabilities


def capability_manifest(*, sticky: bool = False) -> Dict[str, Dict[str, Any]]:
    """The required ``capability_manifest``: the affinity features, said plainly (§3.1)."""
    return {
        "local_activities": {"supported": True, "minimum_protocol_version": "1.18",
                             "implementation": "record_local_activity"},
        "worker_sessions": {"supported": True, "minimum_protocol_version": "1.18",
                            "implementation": "typed_worker_session"},
        "sticky_execution": {"supported": True, "minimum_protocol_version": "1.18",
                             "implementation": "bounded_durable_history_cache"} if sticky else
        {"supported": False, "minimum_protocol_version": "1.18", "reason": "sticky_cache_disabled"},
    }


def valid_registration_token(ack: Mapping[str, Any], worker_id: str) -> Optional[str]:
    """The fenced-registration token of a valid acknowledgement, else None."""
    token = ack.get("registration_token")
    if (
        isinstance(token, str)
        and len(token) == REGISTRATION_TOKEN_LENGTH
        and all(c in "0123456789abcdef" for c in token)
        and ack.get("worker_id") == worker_id
        and ack.get("registered") is True
    ):
        return token
    return None


class ProcessMetrics:
    """The §3.1 ``process_metrics`` object; CPU is measured since the previous sample."""

    def __init__(self) -> None:
        self.started_at = time.time()
        self._started_iso = datetime.fromtimestamp(self.started_at, tz=timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ"
        )
        self._last_sample_at: Optional[float] = None
        self._last_cpu = 0.0

    def sample(self) -> Dict[str, Any]:
        now = time.time()
        metrics: Dict[str, Any] = {
            "process_uptime_seconds": int(now - self.started_at),
            "process_id": os.getpid(),
            "process_started_at": self._started_iso,
        }
        if sys.platform.startswith("linux"):
            try:  # current resident set, not the lifetime peak
                with open("/proc/self/statm") as statm:
                    fields = statm.read().split()
                if len(fields) >= 2:
                    metrics["memory_bytes"] = int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, ValueError):
                pass
        cpu = time.process_time()
        since = self._last_sample_at if self._last_sample_at is not None else self.started_at
        interval = max(0.001, now - since)
        used = max(0.0, cpu - (self._last_cpu if self._last_sample_at is not None else 0.0))
        metrics["cpu_percent"] = max(0.0, min(100.0, round(used / interval * 100.0, 2)))
        self._last_sample_at = now
        self._last_cpu = cpu
        try:
            host = socket.gethostname()
        except OSError:
            host = ""
        if host:
            metrics["host"] = host[:255]
        return metrics


def registration_body(
    *,
    worker_id: str,
    task_queue: str,
    workflow_types: Sequence[str],
    activity_types: Sequence[str],
    fingerprints: Mapping[str, str],
    command_contracts: Mapping[str, Any],
    capabilities: Sequence[str],
    build_id: Optional[str],
    max_concurrent_workflow_tasks: int,
    max_concurrent_activity_tasks: int,
    task_slots: Mapping[str, int],
    process_metrics: Mapping[str, Any],
    sticky: bool = False,
    max_concurrent_worker_sessions: int = 10,
) -> Dict[str, Any]:
    body: Dict[str, Any] = {
        "worker_id": worker_id,
        "task_queue": task_queue,
        "runtime": "python",
        "sdk_version": SDK_VERSION,
        "supported_workflow_types": list(workflow_types),
        "supported_activity_types": list(activity_types),
        "capability_manifest": capability_manifest(sticky=sticky),
        "workflow_definition_fingerprints": dict(fingerprints),
        "workflow_command_contracts": dict(command_contracts),
        "capabilities": list(capabilities),
        "max_concurrent_workflow_tasks": max_concurrent_workflow_tasks,
        "max_concurrent_activity_tasks": max_concurrent_activity_tasks,
        "max_concurrent_worker_sessions": max_concurrent_worker_sessions,
        "task_slots": dict(task_slots),
        "process_metrics": dict(process_metrics),
    }
    if build_id:
        body["build_id"] = build_id
    return body
