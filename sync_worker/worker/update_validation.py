"""Answering update-validation tasks (protocol §4.10): the validator decides before the server accepts.

A worker whose workflows declare a validator (``@<update>.validator`` or
``@workflow.update_validator``) advertises ``update_validation_tasks`` and polls workflow tasks
with ``task_kinds: ["workflow", "update_validation"]``; it refuses to start against a server that
does not advertise synchronous pre-accept validation (the published SDK's rule and message). Each
validation task holds a workflow slot while the run's history is replayed and only the validator
runs (``sync_worker.workflow.update_validation``); then the task is approved or rejected. A
refusal the server says is final (the verdict already recorded, the lease gone) ends it quietly.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .. import payloads
from ..errors import PayloadError, ServerError, WorkerShutdown
from ..protocol import UpdateValidationTask, WorkerPlane
from ..workflow.update_validation import WORKER_FAILED, ValidationVerdict, validate_update

__all__ = ["FINAL_REJECTION_REASONS", "run_update_validation_task", "server_supports_validation"]

logger = logging.getLogger("sync_worker.worker.update_validation")

CAPABILITY = "update_validation_tasks"
#: Refusals of approve/reject that end the task: nothing more is sent (the SDK's list).
FINAL_REJECTION_REASONS = frozenset({
    "duplicate_update_validation_completion", "stale_update_validation_completion", "update_validation_lease_expired",
    "update_validation_task_not_found", "update_validation_task_not_leased", "update_validator_worker_lost",
})
REFUSED = ("Server compatibility error: this worker declares update validators, but the server does not advertise "
           "synchronous pre-accept update validation with atomic multiplexed workflow/update-validation polling. "
           "Refusing registration so validated updates cannot be accepted without validator approval or exceed "
           "worker capacity.")


def server_supports_validation(capabilities: Mapping[str, Any]) -> bool:
    """Whether the server advertises what the SDK requires of it (§4.10)."""
    if capabilities.get(CAPABILITY) is not True:
        return False
    semantics = capabilities.get("synchronous_update_validation")
    poll = semantics.get("task_poll") if isinstance(semantics, Mapping) else None
    kinds = poll.get("task_kinds") if isinstance(poll, Mapping) else None
    return (isinstance(semantics, Mapping) and semantics.get("supported") is True
            and semantics.get("acceptance_boundary") == "validator_approved"
            and semantics.get("worker_capability") == CAPABILITY
            and semantics.get("workflow_contract_field") == "update_validators"
            and isinstance(poll, Mapping) and poll.get("strategy") == "multiplexed"
            and poll.get("endpoint") == "/worker/workflow-tasks/poll" and poll.get("request_field") == "task_kinds"
            and poll.get("response_discriminator") == "task.task_kind"
            and isinstance(kinds, list) and "workflow" in kinds and "update_validation" in kinds)


def _history(raw: Mapping[str, Any]) -> Any:
    events = list(raw.get("history_events") or [])
    export = raw.get("history_export")
    if isinstance(export, Mapping):
        exported = export.get("history_events") or export.get("events")
        if isinstance(exported, list) and len(exported) > len(events):
            events = list(exported)
    return events


def _verdict(task: UpdateValidationTask, registry: Any) -> ValidationVerdict:
    if not task.workflow_type or not task.update_name:
        return ValidationVerdict(False, WORKER_FAILED, "update validation task is missing workflow type or update name",
                                 "UpdateValidationFailed")
    cls = registry.get(task.workflow_type)
    if cls is None:
        return ValidationVerdict(False, WORKER_FAILED, f"no workflow registered for type {task.workflow_type!r}",
                                 "UpdateValidationFailed")
    raw = task.raw
    codec = raw.get("payload_codec", "avro")
    try:
        if codec != payloads.CODEC:
            raise payloads.UnsupportedPayloadCodec(codec)
        start_input = payloads.decode_arguments(raw.get("workflow_arguments"), codec=codec)
        args = payloads.decode_arguments(raw.get("update_arguments"), codec=codec)
    except PayloadError as error:
        return ValidationVerdict(False, WORKER_FAILED, f"cannot decode workflow update validation payload: {error}",
                                 type(error).__name__)
    return validate_update(cls, _history(raw), start_input, task.update_name, args, workflow_id=task.workflow_id,
                           run_id=task.run_id or "", payload_codec=codec)


def run_update_validation_task(*, client: WorkerPlane, task: UpdateValidationTask, registry: Any, worker_id: str,
                               cancel: Any = None) -> str:
    """Decide one validation task and answer it; returns the outcome name (for metrics and logs)."""
    verdict = _verdict(task, registry)
    try:
        if verdict.approved:
            client.approve_update_validation_task(task.update_validation_task_id, lease_owner=worker_id,
                                                  update_validation_attempt=task.attempt, cancel=cancel)
            return "approved"
        client.reject_update_validation_task(task.update_validation_task_id, lease_owner=worker_id,
                                             update_validation_attempt=task.attempt, failure=verdict.failure(),
                                             cancel=cancel)
    except WorkerShutdown:
        return "abandoned"
    except ServerError as error:
        if error.reason() in FINAL_REJECTION_REASONS:
            logger.info("update validation task %s answer was fenced: %s", task.update_validation_task_id,
                        error.reason())
            return "expired"
        logger.warning("failed to answer update validation task %s: %s", task.update_validation_task_id, error)
        return "failed"
    except Exception as error:
        logger.warning("failed to answer update validation task %s: %s", task.update_validation_task_id,
                       type(error).__name__)
        return "failed"
    return "rejected" if verdict.reason != WORKER_FAILED else "failed"
