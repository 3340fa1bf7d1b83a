"""The Django app: ``INSTALLED_APPS += ["sync_worker_django"]``.

``ready()`` only registers the system checks. It never imports workflows or activities and
never starts a thread: web processes and every other management command stay unaffected;
autodiscovery and workers start with ``manage.py durable_worker`` (or an embedding hook).
"""

from __future__ import annotations

from django.apps import AppConfig


class SyncWorkerConfig(AppConfig):
    name = "sync_worker_django"
    label = "sync_worker_django"
    verbose_name = "Durable Workflow worker"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the checks)
