"""Worker-plane routes (protocol §3-§6), relative to the server's ``/api`` prefix.

Templates name their path parameters (``{worker_id}``, ``{task_id}``): the client fills them in
(:func:`path`), the dev server turns them into its matchers. The task routes are one template per
task kind and action.
"""

from __future__ import annotations

from typing import Dict

__all__ = [
    "API_PREFIX",
    "CLUSTER_INFO",
    "DEREGISTER_FENCED",
    "DEREGISTER_LEGACY",
    "HEARTBEAT",
    "KIND_SEGMENTS",
    "MULTIPLEXED_TASK_KINDS",
    "REGISTER",
    "SESSIONS",
    "SESSION",
    "SESSION_HEARTBEAT",
    "label",
    "path",
    "poll_route",
    "task_route",
]

API_PREFIX = "/api"
CLUSTER_INFO = "/cluster/info"
REGISTER = "/worker/register"
HEARTBEAT = "/worker/heartbeat"
DEREGISTER_FENCED = "/worker/registrations/{worker_id}/deregister"
DEREGISTER_LEGACY = "/worker/registrations/{worker_id}"
#: Worker sessions (§3.4): create, renew (heartbeat) and close a session lease.
SESSIONS = "/worker/sessions"
SESSION = "/worker/sessions/{session_id}"
SESSION_HEARTBEAT = "/worker/sessions/{session_id}/heartbeat"

#: Task kind -> its route segment.
KIND_SEGMENTS: Dict[str, str] = {"workflow": "workflow-tasks", "activity": "activity-tasks", "query": "query-tasks",
                                 "update_validation": "update-validation-tasks"}

#: The workflow poll's ``task_kinds`` when it also carries update-validation tasks (§4.10).
MULTIPLEXED_TASK_KINDS = ("workflow", "update_validation")


def poll_route(kind: str) -> str:
    """``/worker/<kind>-tasks/poll``."""
    return f"/worker/{KIND_SEGMENTS[kind]}/poll"


def task_route(kind: str, action: str) -> str:
    """``/worker/<kind>-tasks/{task_id}/<action>`` (complete, fail, heartbeat, history)."""
    return f"/worker/{KIND_SEGMENTS[kind]}/{{task_id}}/{action}"


def path(template: str, **params: str) -> str:
    """A concrete path: ``params`` are already-escaped path segments."""
    return template.format(**params)


def label(template: str) -> str:
    """The route as logs and metrics name it (the published SDK's spelling: ``{taskId}``)."""
    return (template.replace("{task_id}", "{taskId}").replace("{worker_id}", "{workerId}")
            .replace("{session_id}", "{sessionId}"))
