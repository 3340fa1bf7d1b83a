"""``beat_schedule`` → server-side schedules, where the server advertises schedules.

Celery runs a ``celery beat`` process that publishes tasks on time. Here the Durable Workflow
server owns schedules (durable, in one place, no duplicate beats): each entry becomes the
server schedule ``celery-beat-<entry name>`` whose action starts the entry's task as a
one-task canvas run (``sync_worker_celery.canvas``) on the task's queue — so the facade's
workers run it like any ``apply_async``. ``crontab`` becomes a cron expression in
``app.conf.timezone`` (UTC when unset); ``schedule``/seconds/timedelta an ISO-8601 interval.
Installing again updates the schedules in place. A server whose ``GET /api/cluster/info``
does not advertise schedules gets a clear refusal, never a silent no-op.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from .exceptions import UnsupportedFeature
from .schedules import to_spec

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery

__all__ = ["beat_entries", "install_beat_schedule", "schedule_id_for",
           "schedules_unavailable_reason"]

logger = logging.getLogger("sync_worker.celery.beat")

def schedule_id_for(name: str) -> str:
    return "celery-beat-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "entry")


def beat_entries(app: Celery) -> List[Dict[str, Any]]:
    """``beat_schedule`` plus ``add_periodic_task`` entries, normalised (with their server spec)."""
    app.finalize()
    entries: List[Dict[str, Any]] = []
    for name, entry in dict(app.conf.get("beat_schedule") or {}).items():
        entries.append({"name": str(name), "task": entry["task"], "schedule": entry["schedule"],
                        "args": list(entry.get("args") or ()), "kwargs": dict(entry.get("kwargs") or {}),
                        "options": dict(entry.get("options") or {})})
    for periodic in app._periodic:
        sig = periodic["sig"]
        entries.append({"name": periodic["name"], "task": sig.name, "schedule": periodic["schedule"],
                        "args": list(sig.args), "kwargs": dict(sig.kwargs),
                        "options": dict(sig.options, **periodic["options"])})
    timezone = app.conf.get("timezone")
    for entry in entries:
        entry["spec"] = to_spec(entry["schedule"], timezone)
    return entries


def schedules_unavailable_reason(app: Celery) -> Optional[str]:
    """None when the server advertises schedules, else why ``beat_schedule`` cannot be installed."""
    info = app.client.cluster_info(refresh=True)
    control = info.get("control_plane") or {}
    features = control.get("features") if isinstance(control.get("features"), dict) else {}
    advertised = (features or {}).get("schedules") or info.get("schedules")
    if isinstance(advertised, dict) and advertised.get("supported"):
        return None
    return (f"the server at {getattr(app.client, 'base_url', '?')} does not advertise schedules in "
            "GET /api/cluster/info (control_plane.features.schedules), so beat_schedule cannot become "
            "server-side schedules")


def install_beat_schedule(app: Celery) -> List[str]:
    """Create or update one server schedule per beat entry; returns the schedule ids."""
    from sync_worker.client.results import ScheduleAction
    from sync_worker.errors import NotFound

    from .canvas import Signature
    from .canvas_workflow import CANVAS_WORKFLOW, ROOT_PLACEHOLDER, compile_plan

    entries = beat_entries(app)
    if not entries:
        return []
    reason = schedules_unavailable_reason(app)
    if reason is not None:
        raise UnsupportedFeature(f"beat_schedule ({len(entries)} entries) is refused: {reason}")
    client = app.client
    installed: List[str] = []
    for entry in entries:
        options = {k: v for k, v in entry["options"].items() if k in ("queue", "expires", "time_limit",
                                                                      "soft_time_limit", "headers")}
        sig = Signature(entry["task"], entry["args"], entry["kwargs"], options=options, app=app)
        plan = compile_plan(app, sig, ROOT_PLACEHOLDER)
        action = ScheduleAction(workflow_type=CANVAS_WORKFLOW, task_queue=plan["queue"], input=[plan])
        schedule_id = schedule_id_for(entry["name"])
        note = f"celery beat entry {entry['name']!r}: {entry['task']}"
        try:
            client.describe_schedule(schedule_id)
        except NotFound:
            client.create_schedule(schedule_id=schedule_id, spec=entry["spec"], action=action,
                                   overlap_policy="allow_all", note=note)
            logger.info("beat: created schedule %s (%s)", schedule_id, entry["spec"])
        else:
            client.update_schedule(schedule_id, spec=entry["spec"], action=action, overlap_policy="allow_all",
                                   note=note)
            logger.info("beat: updated schedule %s (%s)", schedule_id, entry["spec"])
        installed.append(schedule_id)
    return installed
