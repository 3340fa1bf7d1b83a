"""Workflow-task failures are never silent.

A workflow whose task keeps failing (a result the codec cannot carry, a forgotten ``yield``,
a non-deterministic change, a bug in ``run``) stays ``running`` while the server retries the
task. Each such failure is logged at WARNING with the workflow type, the run, the failure type
and its reason: the first time for a given run and reason, then at most once per
:data:`THROTTLE_SECONDS` with the number of repeats in between, so a task retried every
second cannot flood the log.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Dict, Mapping, Tuple

__all__ = ["THROTTLE_SECONDS", "note_task_failure"]

logger = logging.getLogger("sync_worker.worker.workflow")

THROTTLE_SECONDS = 60.0
_MAX_KEYS = 4096

_lock = threading.Lock()
_seen: Dict[Tuple[str, str, str], Tuple[float, int]] = {}


def _reason(failure: Mapping[str, Any]) -> str:
    message = str(failure.get("message") or "")
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    return first[:300]


def note_task_failure(workflow_type: str, run_id: str, task_id: str, failure: Mapping[str, Any],
                      *, now: Any = time.monotonic) -> bool:
    """Log one workflow-task failure (throttled per run and reason); returns whether it was logged."""
    kind = str(failure.get("type") or "Error")
    reason = _reason(failure)
    key = (run_id, kind, reason)
    at = now()
    with _lock:
        last = _seen.get(key)
        if last is not None and at - last[0] < THROTTLE_SECONDS:
            _seen[key] = (last[0], last[1] + 1)
            return False
        repeats = last[1] if last is not None else 0
        if len(_seen) >= _MAX_KEYS:
            _seen.clear()
        _seen[key] = (at, 0)
    again = f" (again; {repeats} more time(s) since the last warning)" if last is not None else ""
    logger.warning("workflow task %s of %s run %s failed: %s: %s%s; the run stays open and the server "
                   "retries the task", task_id, workflow_type, run_id, kind, reason, again)
    return True
