"""``app.control.inspect()`` / ``app.control.ping()``: what the server's worker list can answer.

Celery asks its workers over a broadcast channel; here the server knows every registered worker
and when each last heartbeated (``GET /api/workers``), so ``ping`` and ``registered`` are answered
from that list: a worker whose status is ``active`` (heartbeating within the server's
``stale_after_seconds``) answers ``{"ok": "pong"}``. What only a live broadcast could tell
(``active``, ``reserved``, ``scheduled``, ``stats``, ...) is refused by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from .exceptions import UnsupportedFeature

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery

__all__ = ["Inspect", "ping"]


def _live_workers(app: Celery, destination: Optional[Sequence[str]]) -> List[Any]:
    wanted = None if destination is None else {destination} if isinstance(destination, str) else set(destination)
    return [w for w in app.client.list_workers().workers
            if w.status == "active" and (wanted is None or w.worker_id in wanted)]


def ping(app: Celery, destination: Optional[Sequence[str]] = None) -> List[Dict[str, Dict[str, str]]]:
    """Celery's ``app.control.ping()`` reply shape: one ``{worker: {"ok": "pong"}}`` per live worker."""
    return [{w.worker_id: {"ok": "pong"}} for w in _live_workers(app, destination)]


class Inspect:
    """``app.control.inspect(destination=None, timeout=1.0)``: ``ping()``, ``registered()``; ``None``
    when no worker answers, as in Celery."""

    def __init__(self, app: Celery, destination: Optional[Sequence[str]] = None, timeout: float = 1.0,
                 **kwargs: Any) -> None:
        self.app = app
        self.destination = destination
        self.timeout = timeout

    def ping(self, destination: Optional[Sequence[str]] = None) -> Optional[Dict[str, Dict[str, str]]]:
        replies = {k: v for reply in ping(self.app, destination or self.destination) for k, v in reply.items()}
        return replies or None

    def registered(self, *taskinfoitems: Any) -> Optional[Dict[str, List[str]]]:
        """The task names each live worker serves (its registered activity types)."""
        replies = {w.worker_id: sorted(t for t in (w.supported_activity_types or []))
                   for w in _live_workers(self.app, self.destination)}
        return replies or None

    registered_tasks = registered

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise UnsupportedFeature(f"app.control.inspect().{name}() is not supported (there is no broadcast channel "
                                 "to workers; ping() and registered() are answered from the server's worker list): "
                                 "use sync_worker.Client.list_workers() / describe_worker()")
