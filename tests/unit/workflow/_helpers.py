"""Small builders for history events in workflow unit tests."""

from __future__ import annotations

from typing import Any, Dict, List

from sync_worker import payloads
from sync_worker.workflow import replay

STARTED_AT = "2026-03-01T12:00:00+00:00"


def ev(kind: str, **payload: Any) -> Dict[str, Any]:
    return {"event_type": kind, "payload": payload}


def started(**payload: Any) -> Dict[str, Any]:
    return {"event_type": "WorkflowStarted", "payload": {"timestamp": STARTED_AT, **payload}}


def blob(value: Any) -> str:
    return payloads.encode(value)


def activity_done(sequence: int, activity_type: str, value: Any, **extra: Any) -> List[Dict[str, Any]]:
    return [ev("ActivityScheduled", sequence=sequence, activity_type=activity_type, **extra),
            ev("ActivityCompleted", sequence=sequence, activity_type=activity_type, result=blob(value),
               payload_codec="avro", **extra)]


def wire(cls: type, history: List[Dict[str, Any]], args: Any = (), **kwargs: Any) -> List[Dict[str, Any]]:
    """Replay and render the commands as the worker would send them."""
    return [command.to_wire("q") for command in replay(cls, history, list(args), **kwargs).commands]


def result_of(commands: List[Dict[str, Any]]) -> Any:
    assert commands[-1]["type"] == "complete_workflow", commands
    return payloads.decode_envelope(commands[-1]["result"])
