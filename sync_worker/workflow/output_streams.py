"""Workflow streams written from workflow code: ``ctx.append_workflow_stream`` / ``close`` / ``error``.

A workflow stream is a run-scoped, offset-ordered output a client reads while the run goes on
(``Client.subscribe_workflow_stream``). Workflow code writes it at a replay-safe boundary, as the
published SDK does: the directive rides a ``record_side_effect`` command (result ``None``) as its
``workflow_stream`` field, so the append and the ``SideEffectRecorded`` event commit together and
replay sees an ordinary side effect (the directive itself is not in history). Each directive
carries the task's durable command identity (the task's ``workflow_command_id``, else its
``task_id``) and a per-replay ordinal, and each appended item the idempotency key
``dw-stream:<identity>:<ordinal>:<index>``; the server checks both (``WorkflowStreamCommandProcessor``).

:class:`WorkflowStreamAppendItem` and the client's read results (:class:`WorkflowStreamItem`,
:class:`WorkflowStreamPage`, :class:`WorkflowStreamDescription`,
:class:`WorkflowStreamAppendResult`) are the SDK's shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .. import payloads

__all__ = ["WorkflowStreamAppendItem", "WorkflowStreamAppendResult", "WorkflowStreamDescription",
           "WorkflowStreamItem", "WorkflowStreamPage", "append_directive", "finish_directive"]


@dataclass
class WorkflowStreamAppendItem:
    """One value (or external payload reference) to append to a stream."""

    payload: Any = None
    payload_reference: Optional[str] = None
    item_type: Optional[str] = None
    content_type: Optional[str] = None
    idempotency_key: Optional[str] = None


@dataclass
class WorkflowStreamDescription:
    """Lifecycle and backlog of one run-scoped output stream."""

    workflow_id: str
    run_id: str
    stream_name: str
    status: str
    last_offset: Optional[int] = None
    total_items: int = 0
    pending_items: int = 0
    error_reason: Optional[str] = None
    opened_at: Optional[str] = None
    last_appended_at: Optional[str] = None
    closed_at: Optional[str] = None
    retention_seconds: Optional[int] = None
    raw: Optional[Dict[str, Any]] = None

    @property
    def terminal(self) -> bool:
        """Whether no more items can be appended (``closed`` or ``errored``)."""
        return self.status in ("closed", "errored")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, workflow_id: str = "", run_id: str = "",
                  ) -> WorkflowStreamDescription:
        def _int(name: str) -> Optional[int]:
            value = data.get(name)
            return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        return cls(workflow_id=str(data.get("workflow_id") or workflow_id),
                   run_id=str(data.get("workflow_run_id") or data.get("run_id") or run_id),
                   stream_name=str(data.get("stream_name") or ""), status=str(data.get("status") or ""),
                   last_offset=_int("last_offset"), total_items=_int("total_items") or 0,
                   pending_items=_int("pending_items") or 0, error_reason=data.get("error_reason"),
                   opened_at=data.get("opened_at"), last_appended_at=data.get("last_appended_at"),
                   closed_at=data.get("closed_at"), retention_seconds=_int("retention_seconds"), raw=dict(data))


@dataclass
class WorkflowStreamItem:
    """One ordered stream item returned by a subscription (``payload`` decoded)."""

    offset: int
    payload: Any = None
    payload_envelope: Optional[Mapping[str, Any]] = None
    payload_reference: Optional[str] = None
    payload_codec: Optional[str] = None
    idempotency_key: Optional[str] = None
    item_type: Optional[str] = None
    content_type: Optional[str] = None
    origin: Optional[str] = None
    origin_reference: Optional[str] = None
    emitted_at: Optional[str] = None
    raw: Optional[Dict[str, Any]] = None


@dataclass
class WorkflowStreamPage:
    """A resumable page of at-least-once deliveries: persist ``next_offset`` once handled."""

    stream: WorkflowStreamDescription
    items: List[WorkflowStreamItem]
    next_offset: int
    terminal: bool
    raw: Optional[Dict[str, Any]] = None


@dataclass
class WorkflowStreamAppendResult:
    """Offsets created or deduplicated by one append request."""

    stream: WorkflowStreamDescription
    accepted_offsets: List[int]
    accepted_count: int
    deduplicated_count: int
    raw: Optional[Dict[str, Any]] = None


def wire_item(item: WorkflowStreamAppendItem) -> Dict[str, Any]:
    """An item as the server takes it (the payload an Avro envelope)."""
    if not isinstance(item, WorkflowStreamAppendItem):
        raise TypeError("workflow stream items must be WorkflowStreamAppendItem instances")
    wire: Dict[str, Any] = {}
    if item.payload is not None or item.payload_reference is None:
        wire["payload"] = payloads.envelope(item.payload)
        wire["payload_codec"] = "avro"
    if item.payload_reference is not None:
        wire["payload_reference"] = item.payload_reference
        wire.setdefault("payload_codec", "avro")
    if item.item_type is not None:
        wire["item_type"] = item.item_type
    if item.content_type is not None:
        wire["content_type"] = item.content_type
    return wire


def append_directive(identity: str, ordinal: int, stream_name: str, items: Sequence[WorkflowStreamAppendItem],
                     max_pending_items: Optional[int]) -> Dict[str, Any]:
    """The ``workflow_stream`` field of an append (the SDK's checks and key format)."""
    if not stream_name:
        raise ValueError("stream_name must not be empty")
    if not items:
        raise ValueError("items must not be empty")
    wire_items = []
    for index, item in enumerate(items):
        wire = wire_item(item)
        wire["idempotency_key"] = f"dw-stream:{identity}:{ordinal}:{index}"
        wire_items.append(wire)
    directive: Dict[str, Any] = {"operation": "append", "stream_name": stream_name, "command_identity": identity,
                                 "command_ordinal": ordinal, "items": wire_items}
    if max_pending_items is not None:
        if max_pending_items < 1:
            raise ValueError("max_pending_items must be at least 1")
        directive["max_pending_items"] = max_pending_items
    return directive


def finish_directive(identity: str, ordinal: int, stream_name: str, error_reason: Optional[str],
                     retention_seconds: Optional[int]) -> Dict[str, Any]:
    """The ``workflow_stream`` field of a close (``error_reason`` None) or an error."""
    if not stream_name:
        raise ValueError("stream_name must not be empty")
    if retention_seconds is not None and retention_seconds < 1:
        raise ValueError("retention_seconds must be at least 1")
    directive: Dict[str, Any] = {"operation": "error" if error_reason is not None else "close",
                                 "stream_name": stream_name, "command_identity": identity,
                                 "command_ordinal": ordinal}
    if error_reason is not None:
        directive["error_reason"] = error_reason
    if retention_seconds is not None:
        directive["retention_seconds"] = retention_seconds
    return directive
