"""``HealthMiddleware``: ``/healthz`` and ``/readyz`` for a WSGI app with embedded workers.

A thin adapter over :mod:`sync_worker.health`: the answer is the embedded handle's
:meth:`~sync_worker.embed.EmbeddedWorkers.probe` (which is :func:`sync_worker.health.probe`
over its workers, plus "standing by" and "draining" from the handle) when this process
started embedded workers, else :func:`sync_worker.health.probe` over every worker running in
the process. Liveness comes from the workers' own supervisor tick, never from the server's
reachability; readiness turns false as soon as a drain is requested.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Iterable, List, Tuple

from .. import health

__all__ = ["HealthMiddleware"]

StartResponse = Callable[..., Any]
WSGIApp = Callable[[Dict[str, Any], StartResponse], Iterable[bytes]]

_REASONS = {200: "200 OK", 503: "503 Service Unavailable"}


class HealthMiddleware:
    """Wrap a WSGI ``app``; GET/HEAD on ``live_path`` / ``ready_path`` never reach it.

    ``handle``: the embedded workers to report (default: whichever this process started,
    :func:`sync_worker.embed.current`, looked up on every probe so it follows restarts).
    """

    def __init__(self, app: WSGIApp, *, live_path: str = health.LIVENESS_PATH,
                 ready_path: str = health.READINESS_PATH, handle: Any = None) -> None:
        self.app = app
        self._paths = {live_path.rstrip("/") or "/": "live", ready_path.rstrip("/") or "/": "ready"}
        self._handle = handle

    def __call__(self, environ: Dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO") or "/").rstrip("/") or "/"
        kind = self._paths.get(path)
        if kind is None or environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return self.app(environ, start_response)
        code, body = self.probe(kind)
        payload = json.dumps(body, sort_keys=True).encode("utf-8")
        headers: List[Tuple[str, str]] = [("Content-Type", "application/json"),
                                          ("Content-Length", str(len(payload))),
                                          ("Cache-Control", "no-store")]
        start_response(_REASONS.get(code, f"{code} Unknown"), headers)
        return [b""] if environ.get("REQUEST_METHOD") == "HEAD" else [payload]

    def probe(self, kind: str) -> Tuple[int, Dict[str, Any]]:
        from . import ForkedHandleError, current

        handle = self._handle if self._handle is not None else current()
        if handle is None:
            return health.probe(kind, None)
        try:
            code, body = handle.probe(kind)
        except ForkedHandleError as error:
            return 503, {"status": "fail", "check": kind, "reason": str(error), "workers": []}
        return int(code), dict(body)
