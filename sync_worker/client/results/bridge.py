"""The bridge-adapter outcome (``durable_workflow`` 2.12 field names)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from ._common import RawAccess, body_of, mapping, opt_int, opt_str


@dataclass
class BridgeAdapterOutcome(RawAccess):
    """What the server did with one bridge event: accepted (and the run it reached) or rejected, and why."""

    schema: str
    version: int
    adapter: str
    action: Optional[str]
    accepted: bool
    outcome: str
    idempotency_key: Optional[str] = None
    reason: Optional[str] = None
    target: Optional[Dict[str, Any]] = None
    correlation: Optional[Dict[str, Any]] = None
    workflow_id: Optional[str] = None
    run_id: Optional[str] = None
    workflow_type: Optional[str] = None
    control_plane_outcome: Optional[str] = None
    raw: Optional[Dict[str, Any]] = field(default=None, repr=False)

    @classmethod
    def from_dict(cls, data: object) -> BridgeAdapterOutcome:
        raw = body_of(data)
        return cls(schema=str(raw.get("schema") or ""), version=opt_int(raw.get("version")) or 0,
                   adapter=str(raw.get("adapter") or ""), action=opt_str(raw.get("action")),
                   accepted=bool(raw.get("accepted")), outcome=str(raw.get("outcome") or ""),
                   idempotency_key=opt_str(raw.get("idempotency_key")), reason=opt_str(raw.get("reason")),
                   target=mapping(raw.get("target")), correlation=mapping(raw.get("correlation")),
                   workflow_id=opt_str(raw.get("workflow_id")), run_id=opt_str(raw.get("run_id")),
                   workflow_type=opt_str(raw.get("workflow_type")),
                   control_plane_outcome=opt_str(raw.get("control_plane_outcome")), raw=raw)
