"""Integrations with third-party observability tools, each behind its own extra.

* :mod:`sync_worker.contrib.opentelemetry` (``pip install "sync-worker[otel]"``): traces across
  client, workflow and activity, and the worker's metrics through an OpenTelemetry meter;
* :mod:`sync_worker.contrib.sentry` (``pip install "sync-worker[sentry]"``): task failures as
  Sentry events with the task's tags.

Nothing in ``sync_worker`` imports these modules; importing one needs its extra. The Django app
and the Celery facade call :func:`enable_for_initialized_tools`, which imports a tool's module only
when the tool is installed and initialised.
"""

from __future__ import annotations

import sys
from typing import List

__all__ = ["enable_for_initialized_tools"]


def enable_for_initialized_tools() -> List[str]:
    """Turn on the integrations whose tool this process has already initialised; returns their names.

    What the Django app and the Celery facade call when they build their workers, as Sentry's
    Django and Celery integrations turn themselves on: a process that ran ``sentry_sdk.init(...)``
    reports task failures without naming :class:`~sync_worker.contrib.sentry.SyncWorkerIntegration`.
    A tool the process has not imported (so not initialised either) is left alone: nothing is imported for it.
    """
    enabled: List[str] = []
    if "sentry_sdk" in sys.modules:
        from .sentry import enable_if_sentry_is_initialized

        if enable_if_sentry_is_initialized():
            enabled.append("sentry")
    return enabled
