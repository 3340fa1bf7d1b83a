"""Moved to :mod:`sync_worker.runtime.gevent_backend` (this documented path keeps working)."""

from __future__ import annotations

from ..runtime.gevent_backend import (
    HUB_MONITOR_ENV,
    GeventBackend,
    GeventNotPatched,
    GreenletHandle,
    HubMonitor,
    fully_patched,
    hub_monitor_interval,
    late_patch_report,
    require_patched,
)

__all__ = [
    "GeventBackend",
    "GeventNotPatched",
    "GreenletHandle",
    "HUB_MONITOR_ENV",
    "HubMonitor",
    "fully_patched",
    "hub_monitor_interval",
    "late_patch_report",
    "require_patched",
]
