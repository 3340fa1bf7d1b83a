"""The workflow instance's ordered message stream: signals and updates share one cursor.

As in the real engine (``MessageStreamCursor``): every accepted signal or update command
reserves the instance's next message sequence; when the command is consumed the run's cursor
moves to that sequence and ``MessageCursorAdvanced`` is recorded, with
``{stream_key: "instance:<workflow id>", previous_position, new_position}``. A signal's advance
comes just before its ``SignalApplied``; an update's just after its ``UpdateCompleted``. The
cursor only moves forward, so a command consumed after a later one records nothing, and a
duplicate request (same ``request_id``) reserves nothing.
"""

from __future__ import annotations

from typing import Optional

from .engine import Engine
from .store import Row


def stream_key(run: Row) -> str:
    return f"instance:{run['workflow_id']}"


def reserve_sequence(engine: Engine, run: Row) -> int:
    """The next position of the instance stream (the counter outlives continue-as-new runs)."""
    key = f"{run['namespace']}\0msgseq\0{run['workflow_id']}"
    row = engine.store.get("kv", key) or {"key": key, "namespace": run["namespace"], "kind": "msgseq", "last": 0}
    row["last"] = int(row["last"]) + 1
    engine.store.put("kv", row)
    return int(row["last"])


def advance_cursor(engine: Engine, run: Row, position: Optional[int]) -> None:
    """Move the run's cursor to ``position`` and record it, unless it is already there or past."""
    if not isinstance(position, int):
        return
    previous = int(run.get("message_cursor_position") or 0)
    if position <= previous:
        return
    run["message_cursor_position"] = position
    engine.append(run, "MessageCursorAdvanced", {"stream_key": stream_key(run), "previous_position": previous,
                                                 "new_position": position})
