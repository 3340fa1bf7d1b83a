"""Registering again when the server no longer knows this worker.

An operator may remove a worker's registration (``sync-worker worker deregister``, the UI, a
server that pruned it): the real server then refuses the worker's polls with 412
``worker_not_registered`` and its heartbeats with 404 of the same reason
(server ``WorkerController::resolveRegisteredWorker`` / ``heartbeat``). Before this, the worker
went on long-polling for nothing while tasks waited. Now the first refusal logs a WARNING and
registers the worker again, once for all its pollers (a generation counter: a poller refused
before another one re-registered does not register a second time); the refused poll counts as an
empty one and the pollers carry on. A failed re-registration raises to the caller, whose usual
back-off repeats it.

Once the worker starts to deregister (:meth:`Rejoin.close`), nothing registers it again: a poll or
heartbeat refused after that (one that raced the deregistration) counts as empty. Otherwise such a
late refusal would bring the registration back to ``active`` after a clean shutdown.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional, TypeVar

from ..errors import ServerError
from ..protocol.reasons import WORKER_NOT_REGISTERED
from .joining import Registrar

__all__ = ["Rejoin", "forgotten"]

logger = logging.getLogger("sync_worker.worker")

T = TypeVar("T")


def forgotten(error: BaseException) -> bool:
    """The server says this worker is not registered (any status: 412 for polls, 404 for heartbeats)."""
    return isinstance(error, ServerError) and error.reason() == WORKER_NOT_REGISTERED


class Rejoin:
    """One re-registration at a time for a worker's pollers and heartbeat."""

    def __init__(self, registrar: Registrar) -> None:
        self.registrar = registrar
        self._lock = threading.Lock()
        #: How many times the worker registered again (also what a refused call compares against).
        self.generation = 0
        self._closed = False

    def close(self) -> None:
        """No registering again from now on; waits for a re-registration under way to finish (so
        the deregistration that follows sees its token)."""
        with self._lock:
            self._closed = True

    def guard(self, call: Callable[..., T]) -> Callable[..., Optional[T]]:
        """``call``, registering again (and answering None) when the server forgot the worker."""
        def guarded(*args: Any, **kwargs: Any) -> Optional[T]:
            seen = self.generation
            try:
                return call(*args, **kwargs)
            except ServerError as error:
                if not forgotten(error):
                    raise
                self.rejoin(seen)
                return None
        return guarded

    def rejoin(self, seen: int) -> None:
        with self._lock:
            if self.generation != seen:
                return  # another poller registered the worker again meanwhile
            if self._closed:
                logger.debug("worker %s is deregistering: a late worker_not_registered refusal is ignored",
                             self.registrar.worker_id)
                return
            worker_id = self.registrar.worker_id
            logger.warning("the server no longer knows worker %s (worker_not_registered: its registration was "
                           "removed); registering it again on task queue %r", worker_id, self.registrar.task_queue)
            self.registrar.register_again()
            self.generation += 1
            logger.info("worker %s registered again", worker_id)
