"""System checks (``manage.py check``): every ``SYNC_WORKER`` misconfiguration, with an id.

Ids (also in docs/django.md): E001 not a dict, E002 unknown key, E003 SERVER_URL,
E004 a token or BUILD_ID, E005 NAMESPACE, E006 TASK_QUEUES, E007 POOL, E008 a count or a
number of seconds, E009 AUTODISCOVER_MODULES, E010 HEALTH_PORT, E011 LOG_FORMAT, E012
EXTERNAL_STORAGE; W001 a ``TASKS`` backend of ours whose queue no ``TASK_QUEUES`` entry serves;
W002 no SERVER_URL (a warning, so ``migrate`` in an image build passes; a worker still refuses to start without one).
"""

from __future__ import annotations

from typing import Any, List

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from .conf import SETTINGS_NAME, command_overrides, get_config, problems

__all__ = ["check_settings", "check_tasks_queues"]

BACKEND_PATH = "sync_worker_django.tasks.DurableWorkflowBackend"


@checks.register("sync_worker")
def check_settings(app_configs: Any = None, **kwargs: Any) -> List[checks.CheckMessage]:
    return [
        (checks.Warning if ".W" in check_id else checks.Error)(
            message, hint=f"see the {SETTINGS_NAME} section of docs/django.md", obj=f"{SETTINGS_NAME}[{key!r}]",
            id=check_id)
        for check_id, key, message in problems()
    ]


@checks.register("sync_worker")
def check_tasks_queues(app_configs: Any = None, **kwargs: Any) -> List[checks.CheckMessage]:
    from django.conf import settings

    backends = getattr(settings, "TASKS", None)
    if not isinstance(backends, dict) or [p for p in problems() if ".E" in p[0]]:
        return []
    try:
        served = {queue.name for queue in get_config(command_overrides()).task_queues}
    except ImproperlyConfigured:  # no SERVER_URL yet (W002): judge the queues anyway
        from .conf import _queues, raw_settings

        raw = raw_settings() or {}
        queues = command_overrides().get("TASK_QUEUES") or raw.get("TASK_QUEUES") or ["default"]
        served = {q.name for q in _queues(queues, 1, 1, {})}
    found: List[checks.CheckMessage] = []
    for alias, params in backends.items():
        if not isinstance(params, dict) or params.get("BACKEND") != BACKEND_PATH:
            continue
        for queue in params.get("QUEUES") or ["default"]:
            if queue not in served:
                found.append(checks.Warning(
                    f"TASKS[{alias!r}] enqueues onto queue {queue!r}, which no {SETTINGS_NAME}['TASK_QUEUES'] "
                    "entry serves: those tasks would wait for a worker that never comes",
                    hint=f"add {queue!r} to {SETTINGS_NAME}['TASK_QUEUES'] (or run a worker with -Q {queue})",
                    obj=f"TASKS[{alias!r}]", id="sync_worker.W001"))
    return found
