# ruff: noqa: I001  (the import line below must start with the text tests._import_swap replaces)
"""A session workflow written against the PUBLISHED SDK, run unchanged (import line swapped) on ours.

``tests/interop/test_sdk_sessions.py`` runs this source as it is on the published SDK's worker
and, with the import line textually replaced (``tests._import_swap``), on sync_worker's. Keep it
free of any name only one side has. Type names are ``interop.session.*``.
"""

from __future__ import annotations

from typing import Any, Dict, List

from durable_workflow import activity, workflow, WorkerSessionOptions  # the swap rewrites this line

STEPS = 4


@activity.defn(name="interop.session.step")
def step(index: int) -> Dict[str, Any]:
    return {"step": index, "worker": activity.context().info.worker_id}


@workflow.defn(name="interop.session.pinned")
class Pinned:
    """``STEPS`` activities pinned to one session, then one free activity."""

    def run(self, ctx: Any, session_id: str) -> Any:
        session = WorkerSessionOptions(session_id=session_id, lease_seconds=60)
        pinned: List[Dict[str, Any]] = []
        for index in range(STEPS):
            pinned.append((yield ctx.schedule_activity("interop.session.step", [index], worker_session=session)))
        free = yield ctx.schedule_activity("interop.session.step", [STEPS])
        return {"pinned": pinned, "free": free}
