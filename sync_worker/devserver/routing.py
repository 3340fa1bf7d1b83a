"""Routing tasks by the types a worker registered (the server's capability filter).

An activity task goes only to a worker whose registration lists its activity type in
``supported_activity_types`` (the engine's ``DefaultActivityTaskBridge::poll`` filters on
``activity_type IN (:types)``; the server's activity poll re-checks it); a workflow task (update
tasks included) and a query task only to a worker whose ``supported_workflow_types`` lists the
run's workflow type (the server's ``WorkflowTaskPoller`` selects ready tasks joined on
``workflow_runs.workflow_type IN (:supported)``). A worker that registered an empty list gets no
task of that kind: its poll answers at once with ``poll_status: "no_activity_capability"`` /
``"no_workflow_capability"``, as the newer server's controllers do. A task no polling worker
supports stays ready, unchanged, until one that does polls; a non-matching poll waits out its
long poll and answers an empty poll.

A poll needs a live registration (412 ``worker_not_registered`` otherwise, as the real server's
``resolveRegisteredWorker``); a registration that left a list out altogether is not filtered for
that kind (both SDKs always send both lists). A task queued where no registered worker takes its
type is logged once (``stranded``).

The claims stay indexed: the type is a stored column of ``wf_tasks`` / ``activities`` and the
claim adds ``AND <type> IN (...)`` to its indexed "oldest ready task of this queue" lookup, so a
poll reads past only the ready tasks of other types ahead of the first match, never the table.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

from .engine import Engine
from .store import Row

__all__ = ["NO_CAPABILITY", "first_ready", "poll_refusal", "types_for"]

#: The poll status of a worker that registered no types of the polled kind.
NO_CAPABILITY = {"workflow": "no_workflow_capability", "query": "no_workflow_capability",
                 "update_validation": "no_workflow_capability",
                 "activity": "no_activity_capability"}

#: Past this many types the claim filters in Python over the queue's ready tasks in order (SQLite
#: builds may cap bound parameters at 999).
_MAX_BOUND_TYPES = 200
_SCAN_BATCH = 100


def types_for(worker: Optional[Row], kind: str) -> Optional[List[str]]:
    """The types ``worker`` may be handed for a poll of ``kind``; ``None`` means any (nothing declared)."""
    if worker is None:
        return None
    key = "supported_activity_types" if kind == "activity" else "supported_workflow_types"
    raw = worker.get(key)
    listed = [t for t in raw if isinstance(t, str)] if isinstance(raw, list) else []
    declared = worker.get("declared_types")
    if isinstance(declared, list) and key not in declared:
        return None
    if not isinstance(declared, list) and not listed:  # a row an older dev server wrote
        return None
    return listed


def first_ready(engine: Engine, table: str, where: str, params: Sequence[Any], order: str,
                type_column: str, types: Optional[Sequence[str]],
                accept: Optional[Callable[[Row], bool]] = None) -> Optional[Row]:
    """The first row of ``table`` matching ``where`` in ``order`` whose ``type_column`` is in ``types``
    (and that ``accept`` admits, when given: it is asked in order until one is admitted)."""
    if accept is not None:
        head = first_ready(engine, table, where, params, order, type_column, types)
        if head is None or accept(head):
            return head
        return _scan(engine, table, where, params, order, type_column, types, accept)
    if types is None:
        found = engine.store.select(table, where, params, order=order, limit=1)
        return found[0] if found else None
    if not types:
        return None
    wanted = sorted(set(types))
    if len(wanted) <= _MAX_BOUND_TYPES:
        marks = ", ".join("?" for _ in wanted)
        found = engine.store.select(table, f"{where} AND {type_column} IN ({marks})", (*params, *wanted),
                                    order=order, limit=1)
        return found[0] if found else None
    allowed = set(wanted)
    offset = 0
    while True:
        batch = engine.store.select(table, where, params, order=order, limit=_SCAN_BATCH, offset=offset)
        for row in batch:
            if row.get(type_column) in allowed:
                return row
        if len(batch) < _SCAN_BATCH:
            return None
        offset += len(batch)


def _scan(engine: Engine, table: str, where: str, params: Sequence[Any], order: str, type_column: str,
          types: Optional[Sequence[str]], accept: Callable[[Row], bool]) -> Optional[Row]:
    """The slow path past a refused first row: the ready rows in order, in batches."""
    allowed = None if types is None else set(types)
    offset = 0
    while True:
        batch = engine.store.select(table, where, params, order=order, limit=_SCAN_BATCH, offset=offset)
        for row in batch:
            if (allowed is None or row.get(type_column) in allowed) and accept(row):
                return row
        if len(batch) < _SCAN_BATCH:
            return None
        offset += len(batch)


def poll_refusal(kind: str, types: Optional[Sequence[str]]) -> Optional[Dict[str, Any]]:
    """The immediate answer of a poll from a worker that registered no type of ``kind``, else ``None``."""
    if types is not None and not types:
        return {"task": None, "poll_status": NO_CAPABILITY[kind]}
    return None

