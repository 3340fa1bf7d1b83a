"""Health probes for the workers running in this process, written once.

Every way of exposing worker health -- the WSGI middleware of :mod:`sync_worker.embed`, the
Django ``healthz``/``readyz`` views, the ``--health-port`` server of the worker commands --
calls :func:`probe`, which turns :meth:`Worker.status` snapshots into one JSON body and an
HTTP status (200 when every worker passes, else 503). No network I/O: a probe is answered
from the status boards, so it stays cheap and safe from any thread.

A :class:`~sync_worker.Worker` adds itself to the process registry when it starts running
and leaves it once its shutdown has finished; a draining worker is still listed (live, not
ready), which is what a load balancer needs to stop routing to a process that is stopping.
"""

from __future__ import annotations

import json
import threading
import weakref
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterable, List, Optional, Protocol, Tuple

from .runtime.status import WorkerStatus


class Probed(Protocol):
    """Anything health can probe: a :class:`~sync_worker.Worker`, a ``NestjsWorker``, a runtime shell."""

    def status(self) -> WorkerStatus: ...


__all__ = [
    "LIVENESS_PATH",
    "READINESS_PATH",
    "HealthServer",
    "Probed",
    "probe",
    "probe_json",
    "register",
    "running_workers",
    "status_to_dict",
    "unregister",
]

LIVENESS_PATH = "/healthz"
READINESS_PATH = "/readyz"

_lock = threading.Lock()
_workers: weakref.WeakSet[Probed] = weakref.WeakSet()
_order: Dict[int, int] = {}
_counter = 0


def register(worker: Probed) -> None:
    """Add a worker to this process's health registry (the Worker does this itself on run)."""
    global _counter
    with _lock:
        if worker not in _workers:
            _counter += 1
            _order[id(worker)] = _counter
            _workers.add(worker)


def unregister(worker: Probed) -> None:
    """Remove a worker from the registry (the Worker does this once its shutdown finished)."""
    with _lock:
        _workers.discard(worker)
        _order.pop(id(worker), None)


def running_workers() -> List[Probed]:
    """The registered workers, oldest first."""
    with _lock:
        return sorted(_workers, key=lambda w: _order.get(id(w), 0))


def status_to_dict(status: WorkerStatus) -> Dict[str, Any]:
    """A status snapshot as plain JSON-ready data (enum values as strings)."""
    data = asdict(status)
    data["state"] = status.state.value
    return data


def probe(kind: str, workers: Optional[Iterable[Probed]] = None) -> Tuple[int, Dict[str, Any]]:
    """``(http_status, body)`` for ``kind`` ``"live"`` or ``"ready"``.

    ``workers`` defaults to every worker registered in this process. With no worker at all
    the answer is 503 with a reason that says so: a probe of a process that should run a
    worker and runs none must fail.
    """
    if kind not in ("live", "ready"):
        raise ValueError(f"probe kind must be 'live' or 'ready', not {kind!r}")
    chosen = running_workers() if workers is None else list(workers)
    statuses = [w.status() for w in chosen]
    if not statuses:
        return 503, {"status": "fail", "check": kind, "reason": "no worker is running in this process", "workers": []}
    passing = [getattr(s, kind) for s in statuses]
    ok = all(passing)
    reasons = [
        f"{s.task_queue}/{s.worker_id}: {getattr(s, kind + '_reason')}"
        for s, good in zip(statuses, passing)
        if not good
    ]
    body: Dict[str, Any] = {
        "status": "ok" if ok else "fail",
        "check": kind,
        "reason": "; ".join(reasons) if reasons else "",
        "workers": [status_to_dict(s) for s in statuses],
    }
    return (200 if ok else 503), body


def probe_json(kind: str, workers: Optional[Iterable[Probed]] = None) -> Tuple[int, bytes]:
    """:func:`probe` with the body encoded as UTF-8 JSON."""
    code, body = probe(kind, workers)
    return code, json.dumps(body, sort_keys=True).encode("utf-8")


def kind_for_path(path: str) -> Optional[str]:
    """``"live"`` / ``"ready"`` for the probe paths (with or without a trailing slash), else None."""
    bare = path.split("?", 1)[0].rstrip("/")
    if bare.endswith(LIVENESS_PATH):
        return "live"
    if bare.endswith(READINESS_PATH):
        return "ready"
    return None


class _ProbeHandler(BaseHTTPRequestHandler):
    server_version = "sync-worker-health"

    def do_GET(self) -> None:
        kind = kind_for_path(self.path)
        if kind is None:
            code, payload = 404, b'{"reason": "not found: try /healthz or /readyz"}'
        else:
            source = getattr(self.server, "workers_source", None)
            code, payload = probe_json(kind, source() if source is not None else None)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: probes are frequent
        return


class HealthServer:
    """``/healthz`` and ``/readyz`` on their own port, for ``--health-port``.

    Runs on a daemon thread; under gevent (patched) that thread is a greenlet, which is
    fine: a probe only reads status boards.
    """

    def __init__(self, port: int, host: str = "127.0.0.1", workers: Optional[Any] = None) -> None:
        self._server = ThreadingHTTPServer((host, port), _ProbeHandler)
        self._server.daemon_threads = True
        self._server.workers_source = workers  # type: ignore[attr-defined]
        self._thread: Optional[threading.Thread] = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="sync-worker-health", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
