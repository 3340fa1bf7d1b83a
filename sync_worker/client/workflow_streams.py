"""A run's workflow streams (output written by workflow code): list, describe, read, append, close.

The published SDK's calls (``list_workflow_streams``, ``describe_workflow_stream``,
``subscribe_workflow_stream``, ``iter_workflow_stream``, ``append_workflow_stream``,
``close_workflow_stream``), blocking, with its argument checks and result types
(``sync_worker.workflow.output_streams``). Delivery is at least once: persist ``next_offset``
only once a page's effects are durable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, Iterator, List, Optional, Sequence

from .. import payloads
from ..workflow.output_streams import (
    WorkflowStreamAppendItem,
    WorkflowStreamAppendResult,
    WorkflowStreamDescription,
    WorkflowStreamItem,
    WorkflowStreamPage,
    wire_item,
)
from .base import ClientBase, segment
from .results._common import body_of

_ROUTE = "/workflows/{id}/runs/{run}/streams"


def _path(workflow_id: str, run_id: str, stream_name: Optional[str] = None) -> str:
    path = f"/workflows/{segment(workflow_id)}/runs/{segment(run_id)}/streams"
    return path + (f"/{segment(stream_name)}" if stream_name is not None else "")


def _stream(data: Mapping[str, Any], workflow_id: str, run_id: str) -> WorkflowStreamDescription:
    stream = data.get("stream", data)
    if not isinstance(stream, Mapping):
        raise ValueError("workflow stream response must contain a stream object")
    return WorkflowStreamDescription.from_dict(stream, workflow_id=str(data.get("workflow_id") or workflow_id),
                                               run_id=str(data.get("workflow_run_id") or run_id))


def _item(raw: Mapping[str, Any]) -> WorkflowStreamItem:
    envelope = raw.get("payload")
    value: Any = envelope
    if isinstance(envelope, Mapping) and "blob" in envelope:
        value = payloads.decode_envelope(dict(envelope))
    reference = raw.get("payload_reference")
    return WorkflowStreamItem(
        offset=int(raw.get("offset", 0)), payload=value,
        payload_envelope=envelope if isinstance(envelope, Mapping) else None,
        payload_reference=str(reference) if reference is not None else None, payload_codec=raw.get("payload_codec"),
        idempotency_key=raw.get("idempotency_key"), item_type=raw.get("item_type"),
        content_type=raw.get("content_type"), origin=raw.get("origin"), origin_reference=raw.get("origin_reference"),
        emitted_at=raw.get("emitted_at"), raw=dict(raw))


class WorkflowStreamsMixin(ClientBase):
    """Workflow-stream routes (``/workflows/{id}/runs/{run}/streams``)."""

    def list_workflow_streams(self, workflow_id: str, run_id: str) -> List[WorkflowStreamDescription]:
        """Every output stream of one run."""
        data = body_of(self._call("control", "GET", _path(workflow_id, run_id), route=_ROUTE,
                                  operation="workflow.streams.list"))
        return [WorkflowStreamDescription.from_dict(s, workflow_id=str(data.get("workflow_id") or workflow_id),
                                                    run_id=str(data.get("workflow_run_id") or run_id))
                for s in data.get("streams", []) if isinstance(s, Mapping)]

    def describe_workflow_stream(self, workflow_id: str, run_id: str, stream_name: str) -> WorkflowStreamDescription:
        """Lifecycle, offsets and pending count of one output stream."""
        data = body_of(self._call("control", "GET", _path(workflow_id, run_id, stream_name),
                                  route=_ROUTE + "/{stream}", operation="workflow.streams.describe"))
        return _stream(data, workflow_id, run_id)

    def subscribe_workflow_stream(self, workflow_id: str, run_id: str, stream_name: str, *, from_offset: int = 0,
                                  max_items: int = 100, wait_seconds: int = 0) -> WorkflowStreamPage:
        """One page from ``from_offset``, waiting up to ``wait_seconds`` (0-60) for an item."""
        if from_offset < 0:
            raise ValueError("from_offset must be non-negative")
        if not 1 <= max_items <= 500:
            raise ValueError("max_items must be between 1 and 500")
        if not 0 <= wait_seconds <= 60:
            raise ValueError("wait_seconds must be between 0 and 60")
        data = body_of(self._call(
            "control", "GET", _path(workflow_id, run_id, stream_name) + "/items", route=_ROUTE + "/{stream}/items",
            params={"from": from_offset, "max_items": max_items, "wait_seconds": wait_seconds},
            read_timeout=max(float(wait_seconds) + 10.0, 5.0), operation="workflow.streams.items"))
        stream = _stream({"stream": data.get("stream"), **{k: data.get(k) for k in ("workflow_id", "workflow_run_id")}},
                         workflow_id, run_id)
        items = [_item(raw) for raw in data.get("items", []) if isinstance(raw, Mapping)]
        return WorkflowStreamPage(stream=stream, items=items,
                                  next_offset=int(data.get("next_offset", from_offset + len(items))),
                                  terminal=bool(data.get("terminal", stream.terminal)), raw=dict(data))

    def iter_workflow_stream(self, workflow_id: str, run_id: str, stream_name: str, *, from_offset: int = 0,
                             max_items: int = 100, wait_seconds: int = 30) -> Iterator[WorkflowStreamItem]:
        """Every item in offset order until the stream is terminal (closed or errored) and read."""
        offset = from_offset
        while True:
            page = self.subscribe_workflow_stream(workflow_id, run_id, stream_name, from_offset=offset,
                                                  max_items=max_items, wait_seconds=wait_seconds)
            yield from page.items
            offset = page.next_offset
            if page.terminal:
                return

    def append_workflow_stream(self, workflow_id: str, run_id: str, stream_name: str,
                               items: Sequence[WorkflowStreamAppendItem], *,
                               max_pending_items: Optional[int] = None) -> WorkflowStreamAppendResult:
        """Append ``items`` from outside the workflow (an item's ``idempotency_key`` deduplicates)."""
        if not items:
            raise ValueError("items must not be empty")
        wire: List[Dict[str, Any]] = []
        for item in items:
            entry = wire_item(item)
            if item.idempotency_key is not None:
                entry["idempotency_key"] = item.idempotency_key
            wire.append(entry)
        body: Dict[str, Any] = {"items": wire}
        if max_pending_items is not None:
            if max_pending_items < 1:
                raise ValueError("max_pending_items must be at least 1")
            body["max_pending_items"] = max_pending_items
        data = body_of(self._call("control", "POST", _path(workflow_id, run_id, stream_name) + "/items",
                                  route=_ROUTE + "/{stream}/items", body=body, operation="workflow.streams.append"))
        return WorkflowStreamAppendResult(
            stream=_stream(data, workflow_id, run_id),
            accepted_offsets=[int(offset) for offset in data.get("accepted_offsets", [])],
            accepted_count=int(data.get("accepted", 0)), deduplicated_count=int(data.get("deduped", 0)),
            raw=dict(data))

    def close_workflow_stream(self, workflow_id: str, run_id: str, stream_name: str, *,
                              error_reason: Optional[str] = None,
                              retention_seconds: Optional[int] = None) -> WorkflowStreamDescription:
        """Close a stream, or mark it errored when ``error_reason`` is given."""
        body: Dict[str, Any] = {}
        if error_reason is not None:
            if not error_reason:
                raise ValueError("error_reason must not be empty")
            body["error_reason"] = error_reason
        if retention_seconds is not None:
            if retention_seconds < 1:
                raise ValueError("retention_seconds must be at least 1")
            body["retention_seconds"] = retention_seconds
        data = body_of(self._call("control", "POST", _path(workflow_id, run_id, stream_name) + "/close",
                                  route=_ROUTE + "/{stream}/close", body=body, operation="workflow.streams.close"))
        return _stream(data, workflow_id, run_id)
