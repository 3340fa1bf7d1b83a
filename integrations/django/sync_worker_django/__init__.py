"""sync_worker_django: the Django app for sync_worker.

``INSTALLED_APPS += ["sync_worker_django"]`` and one settings dict ``SYNC_WORKER = {...}``
(see docs/django.md). What it gives:

* ``manage.py durable_worker`` (Celery-like flags) and ``manage.py durable_devserver``;
* autodiscovery of the apps' ``workflows`` / ``activities`` / ``tasks`` modules when a
  worker starts (never in web processes);
* database hygiene around every task; health views (``sync_worker_django.urls``);
* :func:`start_workflow_on_commit` / :func:`start_activity_on_commit`;
* :func:`get_client` (refuses model instances, datetimes, Decimals before sending);
* :func:`build_workers` for embedding (``SYNC_WORKER_FACTORY=sync_worker_django.workers:build_workers``);
* a ``django.tasks`` backend (``sync_worker_django.tasks.DurableWorkflowBackend``) and
  test helpers (``sync_worker_django.testing``).

Importing this package is light: nothing from Django loads until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "build_client": "sync_worker_django.workers",
    "build_worker": "sync_worker_django.workers",
    "build_workers": "sync_worker_django.workers",
    "get_client": "sync_worker_django.workers",
    "DjangoClient": "sync_worker_django.workers",
    "get_config": "sync_worker_django.conf",
    "autodiscover": "sync_worker_django.discovery",
    "start_workflow_on_commit": "sync_worker_django.on_commit",
    "start_activity_on_commit": "sync_worker_django.on_commit",
    "DjangoValueNotAllowed": "sync_worker_django.values",
}

if TYPE_CHECKING:  # pragma: no cover
    from .conf import get_config
    from .discovery import autodiscover
    from .on_commit import start_activity_on_commit, start_workflow_on_commit
    from .values import DjangoValueNotAllowed
    from .workers import DjangoClient, build_client, build_worker, build_workers, get_client


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sync_worker_django' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DjangoClient",
    "DjangoValueNotAllowed",
    "autodiscover",
    "build_client",
    "build_worker",
    "build_workers",
    "get_client",
    "get_config",
    "start_activity_on_commit",
    "start_workflow_on_commit",
]
