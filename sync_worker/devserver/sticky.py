"""Sticky execution on the dev server (protocol §4.7), kept to a few hooks.

A workflow-task completion may carry ``sticky_cache: {worker_id, run_id, ttl_seconds,
last_history_sequence, ...}``: the worker keeps the run's replayed state. The run then
remembers ``{worker_id, sequence, expires_at}``. When that same worker leases the run's next
task before the TTL ends, the poll response carries only the events after ``sequence``
(``sticky_replay_mode: "sticky_hit_expected"``, ``last_history_sequence``); the full history
stays available through the history route (page token ``"MA=="`` is offset 0). A poll by
any other worker gets the full history (``"forced_cold_replay"`` while another worker holds
the run). Update tasks always get the full history. A failed task forgets the claim.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from .store import Row

__all__ = ["check_recorded", "forget", "note_completion", "sticky_offset"]

_MAX_TTL = 3600


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def note_completion(run: Row, task: Row, body: Dict[str, Any], event_count: Optional[int], ts: float) -> None:
    """Remember (or forget) the completing worker's sticky claim; the caller saves ``run``.

    ``event_count``: the run's events once the completion is recorded; ``None`` when the claim is noted
    before the completion's commands are applied (so a run they close is saved once, claim included):
    then :func:`check_recorded` applies that bound afterwards."""
    claim = body.get("sticky_cache")
    if (not isinstance(claim, dict) or claim.get("worker_id") != task.get("lease_owner")
            or claim.get("run_id") not in (None, run["run_id"])):
        run.pop("sticky", None)
        return
    sequence = _int(claim.get("last_history_sequence"))
    ttl = _int(claim.get("ttl_seconds")) or 300
    if sequence is None or sequence <= 0 or (event_count is not None and sequence > event_count):
        run.pop("sticky", None)
        return
    run["sticky"] = {"worker_id": task["lease_owner"], "sequence": sequence,
                     "expires_at": ts + max(1, min(ttl, _MAX_TTL))}


def check_recorded(run: Row, event_count: int) -> None:
    """A claim noted before the commands were applied: forgotten if it names more than ``event_count``
    events (what :func:`note_completion` with the count refuses)."""
    claim = run.get("sticky")
    if isinstance(claim, dict) and (_int(claim.get("sequence")) or 0) > event_count:
        run.pop("sticky", None)


def forget(run: Row) -> None:
    run.pop("sticky", None)


def sticky_offset(task: Row, run: Row, event_count: int, ts: float) -> Tuple[int, Optional[str]]:
    """``(first event offset, sticky_replay_mode)`` for rendering the run's next task."""
    claim = run.get("sticky")
    if not isinstance(claim, dict):
        return 0, None
    live = float(claim.get("expires_at") or 0) > ts
    sequence = _int(claim.get("sequence")) or 0
    if (live and claim.get("worker_id") == task.get("lease_owner") and not task.get("workflow_update_id")
            and 0 < sequence <= event_count):
        return sequence, "sticky_hit_expected"
    return 0, "forced_cold_replay" if live else None
