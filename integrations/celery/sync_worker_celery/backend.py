"""``app.backend``: Celery's result-backend API over the Durable Workflow server.

Celery code reaches the result backend directly (``app.backend.get_task_meta(id)``,
``backend.ensure_chords_allowed()`` before building a chord, ``AsyncResult(id, backend=...)``,
``self.backend`` inside a task). Here the server keeps every task's state and result, so the
backend's read side answers from it (through :class:`~sync_worker_celery.result.AsyncResult`),
chords are always allowed (a chord is a durable canvas workflow), and the write side --
storing a result by hand, forgetting one, a key-value store's keys and its pub/sub consumer --
is refused by name: the server records a task's outcome from the task's own run, and there is no
key-value store or result channel to reach.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional

from . import states
from .exceptions import UnsupportedFeature

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery

__all__ = ["DurableBackend"]


class DurableBackend:
    """The result backend of a ``sync_worker_celery`` app: the Durable Workflow server."""

    supports_native_join = True
    supports_autoexpire = False
    persistent = True
    implements_incr = False

    def __init__(self, app: Celery) -> None:
        self.app = app

    def __repr__(self) -> str:
        return f"<DurableBackend: {self.as_uri()}>"

    def as_uri(self, include_password: bool = False) -> str:
        return str(self.app.client_options().server_url or "")

    @property
    def url(self) -> str:
        return self.as_uri()

    # -- chords ------------------------------------------------------------------------------------------

    def ensure_chords_allowed(self) -> None:
        """Chords always work here (a chord is a canvas workflow on the server); never raises."""

    # -- reading results ----------------------------------------------------------------------------------

    def get_task_meta(self, task_id: str, cache: bool = True) -> Dict[str, Any]:
        """``{"task_id", "status", "result", "traceback", "children"}`` as Celery's backends return it."""
        from .result import AsyncResult

        meta = dict(AsyncResult(task_id, app=self.app)._meta())
        meta.setdefault("children", [])
        meta["task_id"] = str(task_id)
        return meta

    def get_state(self, task_id: str) -> str:
        return str(self.get_task_meta(task_id)["status"])

    get_status = get_state

    def get_result(self, task_id: str) -> Any:
        return self.get_task_meta(task_id)["result"]

    def get_traceback(self, task_id: str) -> Optional[str]:
        value = self.get_task_meta(task_id)["traceback"]
        return str(value) if value else None

    def get_children(self, task_id: str) -> Any:
        return self.get_task_meta(task_id).get("children")

    def wait_for(self, task_id: str, timeout: Optional[float] = None, interval: float = 0.5,
                 no_ack: bool = True, on_interval: Any = None) -> Dict[str, Any]:
        """Wait until the task is ready; its meta (as Celery's ``BaseBackend.wait_for``)."""
        from .result import AsyncResult

        result = AsyncResult(task_id, app=self.app)
        result.get(timeout=timeout, interval=interval, propagate=False, on_interval=on_interval)
        return self.get_task_meta(task_id)

    def wait_for_pending(self, result: Any, timeout: Optional[float] = None, interval: float = 0.5,
                         propagate: bool = True, **kwargs: Any) -> Any:
        return result.get(timeout=timeout, interval=interval, propagate=propagate)

    def is_cached(self, task_id: str) -> bool:
        return self.get_state(task_id) in states.READY_STATES

    # -- what the server owns: refused by name --------------------------------------------------------------

    def _refuse(self, what: str) -> UnsupportedFeature:
        return UnsupportedFeature(f"app.backend.{what} is not supported: the Durable Workflow server records each "
                                  "task's state and result from the task's own run; return a value, raise, or "
                                  "use self.update_state() inside the task")

    def store_result(self, task_id: str, result: Any, state: str, traceback: Any = None, request: Any = None,
                     **kwargs: Any) -> Any:
        raise self._refuse("store_result()")

    def mark_as_done(self, task_id: str, result: Any, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse("mark_as_done()")

    def mark_as_failure(self, task_id: str, exc: Any, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse("mark_as_failure()")

    def mark_as_revoked(self, task_id: str, reason: str = "", *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedFeature("app.backend.mark_as_revoked() is not supported: revoke with "
                                 "AsyncResult(id).revoke() or app.control.revoke(id)")

    def forget(self, task_id: str) -> None:
        """The server keeps the history of every run; there is nothing to forget (as ``AsyncResult.forget``)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnsupportedFeature(f"app.backend.{name} is not supported: the facade's result backend is the Durable "
                                 "Workflow server, not a key-value store or a result channel (read results with "
                                 "AsyncResult(id) or app.backend.get_task_meta(id))")
