"""Telling a developer that a task waits for a worker that can run it.

Tasks are routed by the types a worker registered (see ``routing``), so a task whose type no
worker on its queue registered stays ready, unchanged, until one that does polls. That is right
(another worker may know the type), but during development it usually means a task module added
while the worker ran: a worker loads its tasks at start. The dev server logs a WARNING the first
time it queues such a task for a (namespace, queue, kind, type), naming the type, the queue and
the fix (nothing while no worker is registered on the queue: work queued before its worker
starts is ordinary). A positive answer is cached, so the registrations are read once per type, not per task.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, List, Optional, Set, Tuple

if TYPE_CHECKING:
    from .engine import Engine
    from .store import Row

log = logging.getLogger("sync_worker.devserver")

__all__ = ["StrandedTypes"]

_Key = Tuple[str, str, str, str]


class StrandedTypes:
    """Which (namespace, queue, kind, type) were seen routable, and which were already reported."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._routable: Set[_Key] = set()
        self._reported: Set[_Key] = set()

    def note(self, engine: Engine, namespace: str, queue: str, kind: str, type_name: str,
             workers: Optional[List[Row]] = None) -> None:
        """Called (in the caller's transaction) when a task of ``type_name`` is queued on ``queue``;
        ``workers``: the queue's registrations, when the caller read them in this transaction."""
        key = (namespace, queue, kind, type_name)
        with self._lock:
            if key in self._routable or key in self._reported:
                return
        if workers is None:
            workers = engine.store.select("workers", "namespace = ? AND task_queue = ?", (namespace, queue))
        live = [w for w in workers if w.get("status") == "active"]
        if any(self._takes(w, kind, type_name) for w in live):
            with self._lock:
                self._routable.add(key)
            return
        if not live:
            return  # no worker yet (work queued before its worker started is ordinary)
        with self._lock:
            self._reported.add(key)
        log.warning("%s %s task of type %r waits on task queue %r: none of its %d registered worker(s) "
                    "registered that type. A worker loads its task types at start: restart it after adding "
                    "code (or run it with --reload while developing).", "an" if kind == "activity" else "a", kind,
                    type_name, queue, len(live))

    @staticmethod
    def _takes(worker: Row, kind: str, type_name: str) -> bool:
        from .routing import types_for  # routing imports the engine, which holds this

        types = types_for(worker, kind)
        return types is None or type_name in types
