"""The prefork pool's status and its ``/healthz`` / ``/readyz`` answers, from the children's reports.

The body keeps the single-process probe's shape (``status``, ``check``, ``reason``, ``workers``:
every child's workers) and adds ``pool``: the parent's view of each child.

The parent runs no worker of its own: its status is the pool's -- which children are alive,
what each reported last (state, readiness, liveness, tasks run) -- and its probes pass when
every child does. The probe server is served from the parent's own loop (no thread: the parent
forks replacements, and a fork must not copy a thread that might hold a lock).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Callable, Dict, Optional, Tuple

from ...health import kind_for_path

__all__ = ["ChildStatus", "PoolHealthServer", "PoolStatus"]


@dataclass(frozen=True)
class ChildStatus:
    """One child slot of the pool, as its current process last reported."""

    tag: str
    role: str
    index: int
    pid: Optional[int]
    alive: bool
    state: str
    ready: bool
    live: bool
    reason: str
    tasks: int
    worker_ids: Tuple[str, ...]
    #: Each of the child's workers as it reported (worker_id, task_queue, state, ready, live, pid).
    workers: Tuple[Dict[str, Any], ...] = ()


@dataclass(frozen=True)
class PoolStatus:
    """The pool: ``state`` is ``starting``, ``running``, ``draining`` or ``stopped``; ready and live
    when every child is; ``replaced`` counts children started in place of one that ended."""

    pool: str
    state: str
    ready: bool
    ready_reason: str
    live: bool
    live_reason: str
    children: Tuple[ChildStatus, ...]
    replaced: int
    recycled: int

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


class _Handler(BaseHTTPRequestHandler):
    server_version = "sync-worker-prefork-health"
    timeout = 2.0  # a slow prober must not hold the parent's loop

    def do_GET(self) -> None:
        kind = kind_for_path(self.path)
        if kind is None:
            code, payload = 404, b'{"reason": "not found: try /healthz or /readyz"}'
        else:
            status: PoolStatus = self.server.pool_status()  # type: ignore[attr-defined]
            ok = status.ready if kind == "ready" else status.live
            reason = status.ready_reason if kind == "ready" else status.live_reason
            body = {"status": "ok" if ok else "fail", "check": kind, "reason": "" if ok else reason,
                    "pool": status.to_dict(),
                    "workers": [dict(w) for child in status.children for w in child.workers]}
            code, payload = (200 if ok else 503), json.dumps(body, sort_keys=True).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: probes are frequent
        return


class PoolHealthServer:
    """``/healthz`` and ``/readyz`` of the pool; the parent calls :meth:`handle` when its socket is readable."""

    def __init__(self, port: int, host: str, pool_status: Callable[[], PoolStatus]) -> None:
        self._server = HTTPServer((host, port), _Handler)
        self._server.timeout = 0
        self._server.pool_status = pool_status  # type: ignore[attr-defined]

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def fileno(self) -> int:
        return self._server.fileno()

    def handle(self) -> None:
        self._server.handle_request()

    def close(self) -> None:
        self._server.server_close()
