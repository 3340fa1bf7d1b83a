"""Trace-context carriers (``observability_context``): what the dev server keeps and hands back.

The contract is the published SDK's (``durable_workflow.telemetry_carrier``; our copy of the rules
is :mod:`sync_worker.protocol.trace_context`). The real server in ``durable-workflow/server``
(as mirrored here) does not implement it yet, so the SDK is the only authority and this is
what a server keeping its promise does. It is **off by default** (``DevServer(trace_context=True)``,
``sync-worker dev --trace-context``): the real server neither advertises nor keeps carriers, and the
dev server answers as the real one does unless asked. When off, a carrier is still checked (a
malformed one is a 422 either way) and then dropped, as a server that ignores the field would.
When on:

* the capability is advertised exactly as the SDK checks it (``discovery``);
* a start (``POST /workflows``) keeps its carrier on the run: every workflow, activity and query
  task of the run carries it back as ``observability_context``. A ``start_child_workflow`` or
  ``continue_as_new`` command's carrier becomes the new run's;
* a signal's or update's carrier is kept with the message; the workflow task that applies it
  carries it back in ``observability_links`` (kind ``command``, ``command_id`` = the signal id or
  update id);
* a cancel's carrier is checked and accepted (nothing runs for a cancel here);
* a malformed carrier is refused with 422 ``validation_failed`` naming the field, so a caller
  never believes a trace was kept when it was not (the SDK only ever sends normalized ones).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..protocol.trace_context import CarrierError, links_body, validate_context
from .engine import Engine
from .store import Row
from .util import ApiError

__all__ = ["FIELD", "accepted", "activity_fields", "command_context", "enabled", "task_fields"]

FIELD = "observability_context"


def _refuse(where: str, message: str) -> ApiError:
    return ApiError(422, "validation_failed", message, errors={where: [message]}, validation_errors={where: [message]})


def enabled(engine: Engine) -> bool:
    return bool(engine.config.trace_context)


def _checked(body: Dict[str, Any], where: str) -> Optional[Dict[str, Any]]:
    value = body.get(FIELD)
    if value is None:
        return None
    try:
        return validate_context(value, where)
    except CarrierError as error:
        raise _refuse(where, str(error)) from None


def accepted(engine: Engine, body: Dict[str, Any], where: str = FIELD) -> Optional[Dict[str, Any]]:
    """The body's carrier to keep: checked (422 naming the field when malformed); None when absent or off."""
    carrier = _checked(body, where)
    return carrier if enabled(engine) else None


def command_context(cmd: Dict[str, Any], index: int) -> None:
    """Check the carrier of ``commands[index]`` (``start_child_workflow`` / ``continue_as_new``)."""
    _checked(cmd, f"commands.{index}.{FIELD}")


def task_fields(task: Row, run: Row, message: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """What a workflow task's poll response adds: the run's carrier, and the link of its message."""
    out: Dict[str, Any] = {}
    context = run.get(FIELD)
    if context is not None:
        out[FIELD] = context
    linked = (message or {}).get(FIELD)
    if linked is not None:
        command_id = message.get("workflow_command_id") or message.get("signal_id") or message.get("update_id") \
            if message is not None else None
        links: List[Dict[str, Any]] = [{"kind": "command", "command_id": str(command_id), "context": linked}]
        body = links_body(task["task_id"], run["run_id"], run["namespace"], links)
        if body is not None:
            out["observability_links"] = body
    return out


def activity_fields(act: Row) -> Dict[str, Any]:
    """What an activity task adds: the carrier of the run that scheduled it (kept on the activity)."""
    context = act.get(FIELD)
    return {FIELD: context} if context is not None else {}
