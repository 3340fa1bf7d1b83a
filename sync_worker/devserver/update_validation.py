"""Synchronous pre-accept update validation: the server asks a worker's validator before accepting.

As the real server (``durable-workflow/server``: ``app/Support/WorkflowUpdateValidationTaskBroker.php``,
``app/Support/ValidatedExternalWorkflowUpdateAdmission.php``, ``app/Support/WorkflowStartService.php``):

* at start, ``WorkflowStarted`` records the command contract an active worker of the queue
  registered for the type (``declared_updates``, ``declared_update_validators``, ...);
* an update named in that durable contract is validated when the contract declares a validator
  for it (a contract recorded without the ``declared_update_validators`` field refuses with
  ``update_validator_contract_missing``); validation needs a ``request_id``;
* one validation task per (namespace, run, update, request id), its input hashed: a retry returns
  the original verdict, other arguments under the same key are ``update_validation_idempotency_conflict``;
* routing: no fresh active worker on the queue -> ``update_validator_worker_unavailable`` (retryable),
  none with the ``update_validation_tasks`` capability -> ``update_validation_capability_unsupported``,
  none whose contract (and definition fingerprint) declares this validator ->
  ``update_validator_worker_incompatible`` (retryable); all 409;
* the caller waits (``update_validation_timeout_seconds``, the server's 10 s) while a worker claims
  the task -- through the multiplexed workflow poll (``task_kinds`` with ``update_validation``,
  answered with ``task.task_kind: "update_validation"``) or the standalone validation poll -- and
  approves or rejects it; the lease is the timeout + 5 s;
* approved: the update is accepted as any other; rejected by the validator: 422
  ``update_validator_rejected`` (the SDK's ``UpdateRejected``), and the server records an
  ``UpdateRejected`` event (nothing the workflow replays: no ``UpdateAccepted`` or
  ``UpdateApplied``, no workflow task); a worker failure: 409 ``update_validation_worker_failed``;
  no verdict in time: 504 ``update_validator_worker_lost`` / ``update_validation_task_not_claimed`` /
  ``update_validation_execution_timeout`` (the SDK's ``UpdateValidationFailed``).

Tasks live in memory, like query tasks: the caller that waits for a verdict does not survive a
restart of the dev server either.
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from typing import Any, Dict, List, Optional, Tuple

from .engine import Engine
from .store import Row
from .util import ApiError, iso, new_id

__all__ = ["CAPABILITY", "ValidationBroker", "declared_contract", "server_semantics"]

CAPABILITY = "update_validation_tasks"
CONTRACT_FIELD = "update_validators"
_TERMINAL = ("approved", "rejected", "failed", "timed_out")
_BROKERS: weakref.WeakKeyDictionary[Engine, ValidationBroker] = weakref.WeakKeyDictionary()


def server_semantics() -> Dict[str, Any]:
    """``server_capabilities.synchronous_update_validation`` (what the SDK checks at registration)."""
    return {"supported": True, "acceptance_boundary": "validator_approved", "worker_capability": CAPABILITY,
            "workflow_contract_field": CONTRACT_FIELD, "validator_execution": "replay_without_handler_or_state_commit",
            "request_id_required": True,
            "task_poll": {"strategy": "multiplexed", "endpoint": "/worker/workflow-tasks/poll",
                          "request_field": "task_kinds", "response_discriminator": "task.task_kind",
                          "task_kinds": ["workflow", "update_validation"]}}


def _names(value: Any) -> List[str]:
    return sorted({item.strip() for item in value if isinstance(item, str) and item.strip()}) \
        if isinstance(value, list) else []


def _fresh(engine: Engine, worker: Row) -> bool:
    return worker.get("status") == "active" and engine.now() - float(worker.get("last_seen_at") or 0) \
        <= engine.config.stale_after_seconds


def _queue_workers(engine: Engine, namespace: str, task_queue: str) -> List[Row]:
    return engine.store.select("workers", "namespace = ? AND task_queue = ?", (namespace, task_queue))


def declared_contract(engine: Engine, namespace: str, task_queue: str, workflow_type: str,
                      workers: Optional[List[Row]] = None) -> Dict[str, Any]:
    """The ``declared_*`` fields ``WorkflowStarted`` records: the contract a fresh active worker of the
    queue registered for the type (``WorkflowStartService::enrichStartedEventWithExternalCommandContract``).

    ``workers``: the queue's registrations, when the caller read them in this transaction."""
    if workers is None:
        workers = _queue_workers(engine, namespace, task_queue)
    for worker in sorted(workers, key=lambda row: -float(row.get("last_heartbeat_at") or row.get("last_seen_at") or 0)):
        if not _fresh(engine, worker) or workflow_type not in (worker.get("supported_workflow_types") or []):
            continue
        contract = (worker.get("workflow_command_contracts") or {}).get(workflow_type)
        if not isinstance(contract, dict):
            continue
        out: Dict[str, Any] = {
            "declared_queries": _names(contract.get("queries")),
            "declared_signals": _names(contract.get("signals")),
            "declared_updates": _names(contract.get("updates")),
        }
        if CONTRACT_FIELD in contract:
            out["declared_update_validators"] = _names(contract.get(CONTRACT_FIELD))
        return out
    return {}


class _Task:
    def __init__(self, namespace: str, run: Row, name: str, request_id: str, arguments: Any, input_hash: str,
                 fingerprint: Optional[str]) -> None:
        self.task_id = new_id("uvt")
        self.namespace, self.run_id, self.workflow_id = namespace, run["run_id"], run["workflow_id"]
        self.workflow_type, self.task_queue = str(run["workflow_type"]), str(run["task_queue"])
        self.update_name, self.request_id, self.arguments, self.input_hash = name, request_id, arguments, input_hash
        self.fingerprint = fingerprint
        self.status = "pending"
        self.attempt = 0
        self.lease_owner: Optional[str] = None
        self.lease_expires_at: Optional[float] = None
        self.failure: Dict[str, Any] = {}
        self.done = threading.Event()


class ValidationBroker:
    """The validation tasks of one dev server (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._by_key: Dict[str, _Task] = {}
        self._by_id: Dict[str, _Task] = {}

    @classmethod
    def of(cls, engine: Engine) -> ValidationBroker:
        with engine.lock:
            broker = _BROKERS.get(engine)
            if broker is None:
                broker = _BROKERS[engine] = cls(engine)
            return broker

    # -- admission -------------------------------------------------------------------------

    def required(self, run: Row, name: str) -> Optional[bool]:
        """Whether update ``name`` needs validation (None: the run has no durable contract for it).

        Raises ``update_validator_contract_missing`` when the contract omits the validator field."""
        started = self.engine.history(run["run_id"], 0, 3)
        payload = next((e.get("payload") or {} for e in started if e.get("event_type") == "WorkflowStarted"), {})
        if name not in (payload.get("declared_updates") or []):
            return None
        if "declared_update_validators" not in payload:
            raise _failure(run, name, "update_validator_contract_missing",
                           "The durable workflow contract does not state whether this update has a validator.", 409)
        return name in (payload.get("declared_update_validators") or [])

    def validate(self, run: Row, name: str, arguments: Any, request_id: Any) -> _Task:
        """Wait for the verdict on this update; returns the approved task, raises the refusal."""
        if not isinstance(request_id, str) or not request_id.strip():
            raise _failure(run, name, "update_validation_request_id_required",
                           "Updates with declared validators require request_id so validation and application "
                           "remain idempotent across retries.", 422, retryable=True)
        engine = self.engine
        namespace = run["namespace"]
        input_hash = hashlib.sha256(json.dumps(arguments, sort_keys=True).encode()).hexdigest()
        key = "\0".join((namespace, run["run_id"], name, request_id))
        with engine.lock:
            task = self._by_key.get(key)
            if task is None:
                started = engine.history(run["run_id"], 0, 3)
                fingerprint = next(((e.get("payload") or {}).get("workflow_definition_fingerprint") for e in started
                                    if e.get("event_type") == "WorkflowStarted"), None)
                task = _Task(namespace, run, name, request_id, arguments, input_hash, fingerprint)
                self._by_key[key], self._by_id[task.task_id] = task, task
            if task.input_hash != input_hash:
                raise _failure(run, name, "update_validation_idempotency_conflict",
                               "The update request ID was already used with different arguments.", 409,
                               update_id=task.task_id)
            if task.status not in _TERMINAL:
                route = self._route(run, name)
                if route is not None:
                    raise _failure(run, name, route[0], route[1], 409, update_id=task.task_id, retryable=route[2])
                engine.notify(namespace, "workflow", task.task_queue)
                engine.notify(namespace, "update_validation", task.task_queue)
        task.done.wait(max(0.0, engine.config.update_validation_timeout_seconds))
        with engine.lock:
            if task.status not in _TERMINAL:
                self._time_out(task)
        if task.status == "approved":
            return task
        failure = task.failure
        status = {"rejected": 422, "timed_out": 504}.get(task.status, 409)
        raise _failure(run, name, str(failure.get("reason") or "update_validation_failed"),
                       str(failure.get("message") or "Synchronous update validation failed."), status,
                       update_id=task.task_id, validation_errors=failure.get("validation_errors"),
                       failure_type=failure.get("type"), update_validation_attempt=task.attempt or None)

    def _route(self, run: Row, name: str) -> Optional[Tuple[str, str, bool]]:
        engine = self.engine
        workers = [w for w in _queue_workers(engine, run["namespace"], run["task_queue"]) if _fresh(engine, w)]
        if not workers:
            return ("update_validator_worker_unavailable",
                    "No active worker is available to perform synchronous update validation.", True)
        capable = [w for w in workers if CAPABILITY in (w.get("capabilities") or [])]
        if not capable:
            return ("update_validation_capability_unsupported",
                    "Active workers do not advertise synchronous pre-accept update validation.", False)
        if not any(self._matches(w, str(run["workflow_type"]), name, None) for w in capable):
            return ("update_validator_worker_incompatible",
                    "Active workers do not advertise a validator-capable implementation matching this workflow run.",
                    True)
        return None

    def _matches(self, worker: Row, workflow_type: str, name: str, fingerprint: Optional[str]) -> bool:
        if workflow_type not in (worker.get("supported_workflow_types") or []):
            return False
        contract = (worker.get("workflow_command_contracts") or {}).get(workflow_type)
        if not isinstance(contract, dict) or name not in _names(contract.get(CONTRACT_FIELD)):
            return False
        return fingerprint is None or (worker.get("fingerprints") or {}).get(workflow_type) == fingerprint

    def _time_out(self, task: _Task) -> None:
        from . import workers as registry

        owner = registry.lookup(self.engine, task.namespace, task.lease_owner) if task.lease_owner else None
        lost = task.status == "leased" and (owner is None or not _fresh(self.engine, owner))
        reason = ("update_validator_worker_lost" if lost else "update_validation_task_not_claimed"
                  if task.status == "pending" else "update_validation_execution_timeout")
        message = ("The validator worker was lost before returning a validation result." if lost else
                   "Synchronous update validation did not complete before the acceptance deadline.")
        task.status, task.failure, task.lease_expires_at = "timed_out", {"reason": reason, "message": message}, None
        task.done.set()

    # -- the worker's side ------------------------------------------------------------------

    def claim(self, namespace: str, queue: str, worker: Optional[Row]) -> Optional[Dict[str, Any]]:
        """Lease the oldest claimable task of ``queue`` this worker can validate (caller holds the lock)."""
        if worker is None or CAPABILITY not in (worker.get("capabilities") or []):
            return None
        ts = self.engine.now()
        for task in self._by_id.values():
            claimable = task.status == "pending" or (task.status == "leased" and (task.lease_expires_at or 0) <= ts)
            if (not claimable or task.namespace != namespace or task.task_queue != queue
                    or not self._matches(worker, task.workflow_type, task.update_name, task.fingerprint)):
                continue
            task.status, task.attempt = "leased", task.attempt + 1
            task.lease_owner = str(worker["worker_id"])
            task.lease_expires_at = ts + self.engine.config.update_validation_timeout_seconds + 5
            return self._payload(task)
        return None

    def _payload(self, task: _Task) -> Dict[str, Any]:
        run = self.engine.get_run(task.run_id) or {}
        return {
            "task_kind": "update_validation", "update_validation_task_id": task.task_id, "update_id": task.task_id,
            "update_validation_attempt": task.attempt, "workflow_id": task.workflow_id, "run_id": task.run_id,
            "workflow_type": task.workflow_type, "update_name": task.update_name,
            "update_arguments": task.arguments, "payload_codec": "avro", "task_queue": task.task_queue,
            "lease_owner": task.lease_owner, "lease_expires_at": iso(task.lease_expires_at),
            "workflow_arguments": run.get("input"), "history_events": self.engine.history(task.run_id),
            "namespace": task.namespace,
        }

    def _leased(self, namespace: str, task_id: str, body: Dict[str, Any]) -> _Task:
        from . import workers as registry

        task = self._by_id.get(task_id)
        attempt, owner = body.get("update_validation_attempt"), body.get("lease_owner")
        if task is None or task.namespace != namespace:
            raise ApiError(404, "update_validation_task_not_found", "Update validation task not found.",
                           update_validation_task_id=task_id, update_id=task_id, outcome="rejected")
        refusal = {"update_validation_task_id": task_id, "update_id": task_id,
                   "update_validation_attempt": task.attempt, "outcome": "rejected"}
        if task.status in _TERMINAL:
            reason = ("stale_update_validation_completion" if task.attempt != attempt or task.lease_owner != owner
                      else "duplicate_update_validation_completion")
            raise ApiError(409, reason, "The update validation task already has a terminal result."
                           if reason.startswith("duplicate") else
                           "Update validation completion belongs to a stale delivery attempt.", **refusal)
        if task.status != "leased":
            raise ApiError(409, "update_validation_task_not_leased", "Update validation task is not leased.",
                           **refusal)
        if task.lease_owner != owner:
            raise ApiError(409, "update_validation_lease_owner_mismatch",
                           "Update validation lease is owned by another worker.", **refusal)
        if task.attempt != attempt:
            raise ApiError(409, "stale_update_validation_completion",
                           "Update validation completion belongs to a stale delivery attempt.", **refusal)
        if (task.lease_expires_at or 0) <= self.engine.now():
            raise ApiError(409, "update_validation_lease_expired", "Update validation task lease has expired.",
                           **refusal)
        worker = registry.lookup(self.engine, namespace, owner)
        if worker is None or not _fresh(self.engine, worker):
            raise ApiError(409, "update_validator_worker_lost", "The validator worker is no longer active.",
                           **refusal)
        return task

    def approve(self, namespace: str, task_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
        with self.engine.lock:
            task = self._leased(namespace, task_id, body)
            task.status, task.lease_expires_at = "approved", None
            task.done.set()
        return {"update_validation_task_id": task_id, "update_id": task_id, "update_validation_attempt": task.attempt,
                "outcome": "approved", "reason": None, "status": 200}

    def reject(self, namespace: str, task_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
        raw = body.get("failure")
        failure: Dict[str, Any] = raw if isinstance(raw, dict) else {}
        reason = _text(failure.get("reason")) or "update_validator_rejected"
        by_validator = reason == "update_validator_rejected"
        with self.engine.lock:
            task = self._leased(namespace, task_id, body)
            task.failure = {
                "reason": reason,
                "message": _text(failure.get("message")) or ("The update validator rejected the request."
                                                             if by_validator else "Update validation failed."),
                "type": _text(failure.get("type")),
                "validation_errors": _validation_errors(failure.get("validation_errors")),
            }
            task.status, task.lease_expires_at = ("rejected" if by_validator else "failed"), None
            task.done.set()
        return {"update_validation_task_id": task_id, "update_id": task_id, "update_validation_attempt": task.attempt,
                "outcome": "rejected" if by_validator else "failed", "reason": reason, "status": 200}


def _text(value: Any) -> Optional[str]:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _validation_errors(value: Any) -> Dict[str, List[str]]:
    if not isinstance(value, dict):
        return {}
    out: Dict[str, List[str]] = {}
    for field, messages in value.items():
        if isinstance(messages, list):
            kept = [message for message in messages if isinstance(message, str) and message]
            if kept:
                out[str(field)] = kept
    return out


def _failure(run: Row, name: str, reason: str, message: str, status: int, *, update_id: Optional[str] = None,
             retryable: bool = False, validation_errors: Any = None, **extra: Any) -> ApiError:
    rejected = reason == "update_validator_rejected"
    fields: Dict[str, Any] = {
        "workflow_id": run["workflow_id"], "run_id": run["run_id"], "update_name": name, "update_id": update_id,
        "update_status": "rejected" if rejected else None,
        "outcome": "rejected_invalid_arguments" if rejected else "update_validation_failed",
        "rejection_reason": reason, "validation_errors": validation_errors or None, "retryable": retryable,
        **extra,
    }
    return ApiError(status, reason, message, **{k: v for k, v in fields.items() if v is not None})


def multiplexed(task_kinds: Any) -> bool:
    """Whether a workflow poll asked for validation tasks too (``task_kinds``)."""
    return isinstance(task_kinds, list) and "update_validation" in task_kinds
