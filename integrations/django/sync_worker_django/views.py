"""Health views: ``healthz`` (liveness) and ``readyz`` (readiness) as JSON, 200 or 503.

Both answer from :func:`sync_worker.health.probe` -- the status boards of the workers
running in *this* process (a worker embedded in the web process, or the ``durable_worker``
command) -- with no network I/O, so a probe stays cheap and a server outage never makes
liveness fail. A web process that runs no worker answers 503 "no worker is running".
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from sync_worker import health

__all__ = ["healthz", "readyz"]


def _answer(kind: str) -> JsonResponse:
    code, body = health.probe(kind)
    return JsonResponse(body, status=code)


@never_cache
@require_GET
def healthz(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Liveness: every worker's poll loop and heartbeat made progress recently."""
    return _answer("live")


@never_cache
@require_GET
def readyz(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Readiness: every worker is registered, polling and not draining."""
    return _answer("ready")
