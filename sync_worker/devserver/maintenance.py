"""History export bundles and the workflow maintenance commands (repair, archive, redrive).

The export is a ``durable-workflow.v2.history-export`` bundle (schema_version 1) with the
sections the published SDK's offline verifier requires and an integrity block: SHA-256 over
the ``json-recursive-ksort-v1`` canonical form (keys sorted at every depth, compact separators,
non-ASCII written as ``\\uXXXX`` UTF-16 units, floats in PHP's notation), computed without the
``integrity`` key itself.
"""

from __future__ import annotations

import hashlib
import json
import math
from decimal import Decimal
from typing import Any, Dict, List, Optional

from ..payloads import FINGERPRINT_HEX
from . import messages
from .engine import Engine
from .store import Row
from .util import TERMINAL_STATUSES, ApiError, iso, new_id

EXPORT_SCHEMA = "durable-workflow.v2.history-export"


# -- canonical JSON -------------------------------------------------------------------------------
def _string(value: str) -> str:
    quoted = json.dumps(value, ensure_ascii=False)
    out = []
    for ch in quoted:
        if ord(ch) < 128:
            out.append(ch)
        else:
            units = ch.encode("utf-16-be")
            out.extend(f"\\u{units[i:i + 2].hex()}" for i in range(0, len(units), 2))
    return "".join(out)


def _float(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError("bundle numbers must be finite")
    text = repr(value)
    mantissa, marker, exponent = text.partition("e")
    if not marker:
        return text
    power = int(exponent)
    if -4 <= power < 17:  # PHP writes these in fixed notation, keeping a fraction
        fixed = format(Decimal(text), "f")
        return fixed if "." in fixed else fixed + ".0"
    return f"{mantissa if '.' in mantissa else mantissa + '.0'}e{power:+d}"


def canonical_json(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(str(k))}:{canonical_json(value[k])}" for k in sorted(value)) + "}"
    if isinstance(value, list):
        return "[" + ",".join(canonical_json(v) for v in value) + "]"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, float):
        return _float(value)
    return json.dumps(value)


# -- export --------------------------------------------------------------------------------------
def _payload_entry(path: str, value: Any) -> Dict[str, Any]:
    return {"path": path, "available": value is not None, "codec": "avro", "redacted": False,
            "avro_framing": "durable_workflow.protocol.Value@base64",
            "writer_schema_fingerprint": f"crc64-avro:{FINGERPRINT_HEX}"}


def export(engine: Engine, namespace: str, workflow_id: str, run_id: str) -> Dict[str, Any]:
    run = engine.require_run(namespace, workflow_id, run_id)
    events = engine.history(run["run_id"])
    history = [{"id": e["id"], "sequence": e["sequence"], "type": e["event_type"], "event_type": e["event_type"],
                "recorded_at": e["recorded_at"], "payload": e["payload"]} for e in events]
    kinds = {"SignalReceived": "signals", "UpdateAccepted": "updates", "ActivityScheduled": "activities",
             "TimerScheduled": "timers"}
    sections: Dict[str, List[Dict[str, Any]]] = {name: [] for name in kinds.values()}
    failures: List[Dict[str, Any]] = []
    for event in events:
        section = kinds.get(event["event_type"])
        if section is not None:
            sections[section].append({"sequence": event["sequence"], **event["payload"]})
        if event["event_type"] in ("WorkflowFailed", "ActivityFailed", "WorkflowTimedOut"):
            failures.append({"sequence": event["sequence"], "type": event["event_type"], **event["payload"]})
    closed = run["status"] in TERMINAL_STATUSES
    current = engine.current_run(namespace, workflow_id)
    exported_at = iso(engine.now())
    last_seq = events[-1]["sequence"] if events else 0
    bundle: Dict[str, Any] = {
        "schema": EXPORT_SCHEMA, "schema_version": 1, "exported_at": exported_at,
        "dedupe_key": f"{namespace}:{workflow_id}:{run['run_id']}:{last_seq}", "history_complete": closed,
        "workflow": {
            "instance_id": workflow_id, "run_id": run["run_id"], "run_number": int(run.get("run_number") or 1),
            "is_current_run": current is not None and current["run_id"] == run["run_id"],
            "current_run_id": current["run_id"] if current else None, "current_run_source": "instance",
            "workflow_type": run["workflow_type"], "namespace": namespace, "task_queue": run["task_queue"],
            "business_key": run.get("business_key"), "memo": run.get("memo") or {},
            "search_attributes": run.get("search_attributes") or {}, "status": run["status"],
            "status_bucket": "closed" if closed else "running", "closed_reason": run.get("closed_reason"),
            "last_history_sequence": last_seq,
        },
        "payloads": {"codec": "avro",
                     "arguments": {"available": run.get("input") is not None, "data": run.get("input")},
                     "output": {"available": run.get("output") is not None, "data": run.get("output")}},
        "history_events": history, "commands": [], "tasks": [], "failures": failures, **sections,
        "links": {"parent": run.get("parent"), "continued_from_run_id": run.get("continued_from"),
                  "children": list(run.get("children") or [])},
        "redaction": {"applied": False, "paths": []},
        "codec_schemas": {"avro": {"schema": "durable_workflow.protocol.Value",
                                   "fingerprint": f"crc64-avro:{FINGERPRINT_HEX}"}},
        "payload_manifest": {"version": 1, "entries": [_payload_entry("payloads.arguments", run.get("input")),
                                                       _payload_entry("payloads.output", run.get("output"))]},
        "metadata": {"exported_at": exported_at, "format_version": 1, "event_count": len(history),
                     "exporter": "sync-worker-devserver"},
    }
    checksum = hashlib.sha256(canonical_json(bundle).encode("utf-8")).hexdigest()
    bundle["integrity"] = {"canonicalization": "json-recursive-ksort-v1", "checksum_algorithm": "sha256",
                           "checksum": checksum, "signature": None}
    return bundle


# -- maintenance commands -----------------------------------------------------------------------
def _receipt(run: Row, outcome: str, **extra: Any) -> Dict[str, Any]:
    return {"workflow_id": run["workflow_id"], "run_id": run["run_id"], "outcome": outcome,
            "command_status": "accepted", "command_id": new_id("cmd"), **extra}


def repair(engine: Engine, namespace: str, workflow_id: str) -> Dict[str, Any]:
    """Give a stranded open run the workflow task it is missing; a healthy or closed run is left as it is."""
    run = engine.require_run(namespace, workflow_id)
    if run["status"] in TERMINAL_STATUSES:  # nothing can be stranded in a closed run
        return _receipt(run, "repair_not_needed", repaired=False)
    task = engine.store.get("wf_tasks", run["task_id"]) if run.get("task_id") else None
    outstanding = task is not None and task["state"] in ("ready", "delayed", "leased")
    # stranded: nothing will hand the run a task although it has work (never started, or messages waiting)
    needs_task = messages.needs_task(run)
    repaired = not outstanding and needs_task and run.get("kind") == "workflow"
    if repaired:
        engine.wake(run)
        engine.save_run(run)
    return _receipt(run, "repair_requested", repaired=repaired)


def archive(engine: Engine, namespace: str, workflow_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
    reason: Optional[str] = body.get("reason") if isinstance(body.get("reason"), str) else None
    if body.get("reason") is not None and reason is None:
        raise ApiError(422, "validation_failed", "reason must be a string", errors={"reason": ["must be a string"]},
                       validation_errors={"reason": ["must be a string"]})
    run = engine.require_run(namespace, workflow_id)
    if run["status"] not in TERMINAL_STATUSES:
        raise ApiError(409, "run_not_closed", f"workflow {workflow_id} is still open; only closed runs archive",
                       workflow_id=workflow_id, run_id=run["run_id"], control_plane={"operation": "archive"})
    if not run.get("archived_at"):
        run["archived_at"] = engine.now()
        run["archive_reason"] = reason
        engine.save_run(run)
    return _receipt(run, "archived", reason=reason, archived_at=iso(run["archived_at"]))


def redrive(engine: Engine, namespace: str, workflow_id: str, run_id: str) -> Dict[str, Any]:
    run = engine.require_run(namespace, workflow_id, run_id)
    raise ApiError(409, "redrive_unsupported",
                   "the dev server cannot redrive a run (continuing it with its completed activity results)",
                   workflow_id=workflow_id, run_id=run["run_id"], control_plane={"operation": "redrive"})
