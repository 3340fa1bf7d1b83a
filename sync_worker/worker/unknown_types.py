"""One WARNING per task type a worker was handed but does not serve.

The server routes a task only to a worker whose registration lists its type (the engine's
activity and workflow task bridges filter by ``supported_*_types``), so this happens only
when routing is looser (an older server, a worker whose registration changed) or the code
changed under a running worker (a task module added to a Django project while
``durable_worker`` runs: restart the worker). The attempt is failed as retryable, so a worker
that has the type picks up the retry; the warning says which type and what this worker has.
"""

from __future__ import annotations

import logging
import threading
from typing import Iterable, Set, Tuple

__all__ = ["warn_unknown_type"]

logger = logging.getLogger("sync_worker.worker")
_seen: Set[Tuple[int, str, str]] = set()
_lock = threading.Lock()


def warn_unknown_type(owner: object, kind: str, name: str, registered: Iterable[str]) -> bool:
    """Log the first time ``owner`` (a registry) is handed a ``kind`` task of type ``name``."""
    key = (id(owner), kind, name)
    with _lock:
        if key in _seen:
            return False
        _seen.add(key)
    names = sorted(registered)
    logger.warning("received a %s task of type %r, which this worker does not register (it registers %s); "
                   "failing this attempt as retryable so a worker that has it can run it. If the code changed "
                   "while the worker ran, restart the worker.", kind, name, names or "no such types")
    return True
