"""Workflow updates: accept (``UpdateAccepted``), run on a worker via an update workflow task,
record the outcome (``UpdateApplied`` + ``UpdateCompleted``), optionally wait for it."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Optional, Tuple

from . import messages, trace_context
from .engine import Engine
from .payload_checks import check_payload
from .store import Row
from .update_validation import ValidationBroker
from .util import TERMINAL_STATUSES, ApiError, new_id
from .validation import duration

_WAIT_FOR = ("accepted", "completed")


def _outcome_key(namespace: str, update_id: str) -> str:
    return f"{namespace}\0update\0{update_id}"


def submit(engine: Engine, namespace: str, workflow_id: str, run_id: Optional[str], name: str,
           body: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
    wait_for = body.get("wait_for") or "accepted"
    if wait_for not in _WAIT_FOR:
        raise ApiError(422, "validation_failed", f"wait_for must be one of {list(_WAIT_FOR)}",
                       errors={"wait_for": ["invalid"]}, validation_errors={"wait_for": ["invalid"]})
    raw_timeout = body.get("wait_timeout_seconds")
    seconds = duration(raw_timeout, "wait_timeout_seconds")
    wait_timeout = 30.0 if seconds is None else min(seconds, 3600.0)
    arguments = body.get("input", body.get("arguments"))
    check_payload(arguments, "input", codec=body.get("payload_codec"))
    carrier = trace_context.accepted(engine, body)
    request_id = body.get("request_id")
    dedupe = f"{namespace}\0update_request\0{workflow_id}\0{request_id}" if isinstance(request_id, str) else None
    validated_run = _validate(engine, namespace, workflow_id, run_id, name, arguments, request_id, dedupe)
    with engine.tx():
        run = engine.require_run(namespace, workflow_id, run_id)
        stored = engine.store.get("kv", dedupe) if dedupe else None
        if validated_run is not None and stored is None and run["run_id"] != validated_run:
            # ``commitValidatorApproval``: the approval belongs to the run it validated
            raise ApiError(409, "stale_update_validation_completion",
                           "The workflow advanced to a different run before validation could be committed.",
                           workflow_id=workflow_id, run_id=validated_run, update_name=name,
                           outcome="update_validation_failed", rejection_reason="stale_update_validation_completion",
                           retryable=True)
        if stored is not None:
            # A repeated request id is the original update, whatever arguments came with it: the
            # original identity, arguments and outcome are returned and nothing is recorded again.
            update_id = str(stored["update_id"])
            name = str(stored["intent"].get("name") or name)
            run = engine.get_run(stored["run_id"]) or run
        else:
            if run["status"] in TERMINAL_STATUSES:
                raise ApiError(409, "run_not_active", f"workflow {workflow_id} is not active",
                               workflow_id=workflow_id, run_id=run["run_id"], control_plane={"operation": "update"})
            update_id = new_id("upd")
            payload = {"update_id": update_id, "update_name": name, "payload_codec": "avro",
                       "request_id": request_id, "workflow_instance_id": workflow_id, "workflow_run_id": run["run_id"]}
            if arguments is not None:
                payload["arguments"] = arguments
            engine.append(run, "UpdateAccepted", payload)
            entry = {"update_id": update_id, "update_name": name, "arguments": arguments,
                     "message_sequence": messages.reserve_sequence(engine, run)}
            if carrier is not None:
                entry[trace_context.FIELD] = carrier
            run.setdefault("pending_updates", []).append(entry)
            engine.wake(run)
            engine.save_run(run)
            if dedupe:
                engine.store.put("kv", {"key": dedupe, "namespace": namespace, "kind": "update_request",
                                        "intent": {"name": name, "arguments": arguments}, "update_id": update_id,
                                        "run_id": run["run_id"]})
    base = {"update_id": update_id, "update_name": name, "workflow_id": workflow_id, "run_id": run["run_id"],
            "wait_for": wait_for, "wait_timeout_seconds": wait_timeout, "request_id": request_id,
            "retained": stored is not None}
    outcome = _wait(engine, namespace, update_id, wait_timeout if wait_for == "completed" else 0.0)
    if outcome is None:
        return 200, {**base, "outcome": "accepted", "update_status": "accepted", "command_status": "accepted",
                     "wait_timed_out": wait_for == "completed", "result": None}
    if outcome["status"] == "failed":
        raise ApiError(422, "update_failed", outcome.get("message") or "update failed", **base,
                       update_status="failed", outcome="failed", failure_message=outcome.get("message"),
                       exception_type=outcome.get("exception_type"), wait_timed_out=False)
    return 200, {**base, "outcome": "completed", "update_status": "completed", "command_status": "completed",
                 "wait_timed_out": False, "result": None, "result_envelope": outcome.get("result")}


def _validate(engine: Engine, namespace: str, workflow_id: str, run_id: Optional[str], name: str, arguments: Any,
              request_id: Any, dedupe: Optional[str]) -> Optional[str]:
    """Pre-accept validation (``update_validation``): the run id an approval is for, None when the
    update needs none; a refusal is raised (a validator's rejection recorded first)."""
    broker = ValidationBroker.of(engine)
    with engine.tx():
        run = engine.require_run(namespace, workflow_id, run_id)
        stored = engine.store.get("kv", dedupe) if dedupe else None
        if stored is not None and stored.get("rejection") is not None:
            rejection = stored["rejection"]
            raise ApiError(422, "update_validator_rejected", rejection["message"], **rejection["body"])
        if stored is not None or run["status"] in TERMINAL_STATUSES or not broker.required(run, name):
            return None
    try:
        broker.validate(run, name, arguments, request_id)
    except ApiError as refusal:
        if refusal.reason == "update_validator_rejected":
            _record_rejection(engine, run, name, arguments, refusal, dedupe)
        raise
    return str(run["run_id"])


def _record_rejection(engine: Engine, run: Row, name: str, arguments: Any, refusal: ApiError,
                      dedupe: Optional[str]) -> None:
    """``recordValidatorRejection``: an ``UpdateRejected`` event (nothing replay reads) and the verdict a
    retry of the same request id gets again."""
    update_id = str(refusal.extra.get("update_id") or new_id("upd"))
    command_id = new_id("cmd")
    refusal.extra.update({"accepted": False, "command_id": command_id, "workflow_command_id": command_id,
                          "command_status": "rejected", "update_id": update_id})
    with engine.tx():
        current = engine.get_run(run["run_id"]) or run
        engine.append(current, "UpdateRejected", {
            "workflow_command_id": command_id, "update_id": update_id, "workflow_instance_id": run["workflow_id"],
            "workflow_run_id": run["run_id"], "update_name": name, "arguments": arguments,
            "validation_errors": refusal.extra.get("validation_errors") or {}})
        if dedupe:
            engine.store.put("kv", {"key": dedupe, "namespace": run["namespace"], "kind": "update_request",
                                    "intent": {"name": name, "arguments": arguments}, "update_id": update_id,
                                    "run_id": run["run_id"],
                                    "rejection": {"message": refusal.message, "body": dict(refusal.extra)}})


_changed = threading.Condition()


def _wait(engine: Engine, namespace: str, update_id: str, timeout: float) -> Optional[Dict[str, Any]]:
    deadline = time.monotonic() + max(0.0, timeout)
    while True:
        with engine.lock:
            stored = engine.store.get("kv", _outcome_key(namespace, update_id))
        if stored is not None:
            return dict(stored["outcome"])
        remaining = deadline - time.monotonic()
        if remaining <= 0 or engine.stopping:
            return None
        with _changed:
            _changed.wait(min(remaining, 0.25))


def record_outcome(engine: Engine, run: Row, cmd: Dict[str, Any]) -> None:
    """Apply the ``complete_update`` / ``fail_update`` command of an update task.

    As the engine's ``applyCompleteUpdate`` / ``applyFailUpdate`` (and the Rust port's
    ``apply_update``): ``UpdateApplied`` and ``UpdateCompleted`` (only the latter, with the
    failure, for ``fail_update``), then the instance cursor's ``MessageCursorAdvanced`` (always
    recorded for an update). Both update events carry the same ``sequence``, the Rust rule: the
    run's highest authored step sequence + 1, not consumed (the next step still takes it).
    ``resume.check_commands`` already refused a command for another update.
    """
    update_id = cmd["update_id"]
    pending = run.get("pending_updates") or []
    found = next((u for u in pending if u["update_id"] == update_id), None)
    if found is None:
        return  # unknown or already recorded: a replayed completion changes nothing
    run["pending_updates"] = [u for u in pending if u["update_id"] != update_id]
    sequence = int(run.get("next_seq") or 0) + 1
    applied: Dict[str, Any] = {"update_id": update_id, "update_name": found["update_name"], "payload_codec": "avro",
                               "sequence": sequence, "workflow_instance_id": run["workflow_id"],
                               "workflow_run_id": run["run_id"]}
    if found.get("arguments") is not None:
        applied["arguments"] = found["arguments"]
    if cmd["type"] == "complete_update":
        engine.append(run, "UpdateApplied", applied)
        engine.append(run, "UpdateCompleted", {"update_id": update_id, "update_name": found["update_name"],
                                               "result": cmd.get("result"), "payload_codec": "avro",
                                               "sequence": sequence})
        outcome = {"status": "completed", "result": cmd.get("result")}
    else:
        engine.append(run, "UpdateCompleted", {"update_id": update_id, "update_name": found["update_name"],
                                               "message": cmd.get("message"), "failed": True,
                                               "exception_type": cmd.get("exception_type"), "sequence": sequence})
        outcome = {"status": "failed", "message": cmd.get("message"), "exception_type": cmd.get("exception_type")}
    messages.advance_cursor(engine, run, found.get("message_sequence"))
    engine.store.put("kv", {"key": _outcome_key(run["namespace"], update_id), "namespace": run["namespace"],
                            "kind": "update", "outcome": outcome})
    if run.get("open_wait"):
        # The dev server's own rule (the engine creates no task here): the handler may have
        # satisfied the wait the run is blocked on, so the run gets a plain task. A worker whose
        # predicate is still false re-emits the same open, which records nothing (``resume``).
        run["dirty"] = True
    with _changed:
        _changed.notify_all()
