"""``reason`` strings of worker-plane refusals that both sides name (server answers, worker reads).

Only the reasons the runtime or the dev server act on are here; the full catalogue is the
server's (``reference/protocol.md`` §8).
"""

from __future__ import annotations

__all__ = [
    "ACTIVITY_ATTEMPT_MISMATCH",
    "FENCING_REASONS",
    "LEASE_EXPIRED",
    "LEASE_OWNER_MISMATCH",
    "QUERY_TASK_ATTEMPT_MISMATCH",
    "REGISTRATION_TOKEN_MISMATCH",
    "RUN_ALREADY_CLOSED",
    "RUN_CLOSED",
    "RUN_CLOSED_REASONS",
    "TASK_NOT_FOUND",
    "TASK_NOT_LEASED",
    "UPDATE_TASK_MISMATCH",
    "WORKER_NOT_REGISTERED",
    "WORKFLOW_TASK_ATTEMPT_MISMATCH",
    "WORKFLOW_TASK_WAITING_FOR_HISTORY",
]

LEASE_EXPIRED = "lease_expired"
TASK_NOT_FOUND = "task_not_found"
TASK_NOT_LEASED = "task_not_leased"
LEASE_OWNER_MISMATCH = "lease_owner_mismatch"
WORKFLOW_TASK_ATTEMPT_MISMATCH = "workflow_task_attempt_mismatch"
ACTIVITY_ATTEMPT_MISMATCH = "activity_attempt_mismatch"
QUERY_TASK_ATTEMPT_MISMATCH = "query_task_attempt_mismatch"
UPDATE_TASK_MISMATCH = "update_task_mismatch"
RUN_CLOSED = "run_closed"
RUN_ALREADY_CLOSED = "run_already_closed"
#: The run closed while its task was leased: ambiguous, nothing to fail (protocol §4.7).
RUN_CLOSED_REASONS = frozenset({RUN_CLOSED, RUN_ALREADY_CLOSED})
WORKER_NOT_REGISTERED = "worker_not_registered"
REGISTRATION_TOKEN_MISMATCH = "registration_token_mismatch"
#: The failure ``type`` of the benign "no command yet" workflow-task release (§4.5).
WORKFLOW_TASK_WAITING_FOR_HISTORY = "WorkflowTaskWaitingForHistory"
#: Refusals of a workflow task's outcome that mean the task is no longer ours: nothing more is sent.
FENCING_REASONS = frozenset({LEASE_EXPIRED, LEASE_OWNER_MISMATCH, RUN_ALREADY_CLOSED, RUN_CLOSED, TASK_NOT_FOUND,
                             TASK_NOT_LEASED, WORKFLOW_TASK_ATTEMPT_MISMATCH})
