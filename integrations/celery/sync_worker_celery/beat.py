"""``beat_schedule`` → server-side schedules, where the server advertises schedules.

Celery runs a ``celery beat`` process that publishes tasks on time. Here the Durable Workflow
server owns schedules (durable, one place, no duplicate beats): each entry becomes a server
schedule that starts the entry's task as a one-task canvas run on its queue. A server whose
``GET /api/cluster/info`` does not advertise schedules gets a clear refusal, never a silent
no-op.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from .exceptions import UnsupportedFeature
from .schedules import to_spec

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery

__all__ = ["beat_entries", "install_beat_schedule", "schedules_unavailable_reason"]

logger = logging.getLogger("sync_worker.celery.beat")


def beat_entries(app: Celery) -> List[Dict[str, Any]]:
    """``beat_schedule`` plus ``add_periodic_task`` entries, normalised."""
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
    for entry in entries:
        entry["spec"] = to_spec(entry["schedule"])
    return entries


def schedules_unavailable_reason(app: Celery) -> Optional[str]:
    """None when the server advertises schedules, else why ``beat_schedule`` cannot be installed."""
    info = app.client.cluster_info(refresh=True)
    capabilities = ((info.get("worker_protocol") or {}).get("server_capabilities") or {})
    advertised = info.get("schedules") or capabilities.get("schedules") or \
        (info.get("control_plane") or {}).get("schedules")
    if advertised:
        return None
    return (f"the server at {getattr(app.client, 'base_url', '?')} does not advertise schedules in "
            "GET /api/cluster/info, so beat_schedule cannot become server-side schedules")


def install_beat_schedule(app: Celery) -> List[str]:
    """Create (or keep) one server schedule per beat entry; returns their names."""
    entries = beat_entries(app)
    if not entries:
        return []
    reason = schedules_unavailable_reason(app)
    if reason is not None:
        raise UnsupportedFeature(f"beat_schedule ({len(entries)} entries) is refused: {reason}")
    create = getattr(app.client, "create_schedule", None)
    if create is None:  # pragma: no cover - a Client without the schedules routes
        raise UnsupportedFeature("beat_schedule is refused: this sync_worker Client has no schedule routes")
    raise UnsupportedFeature("beat_schedule is refused: server schedules are advertised, but this facade "
                             "does not create them yet")
