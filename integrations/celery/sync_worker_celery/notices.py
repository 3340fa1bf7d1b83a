"""One-time notices for Celery options that are accepted and ignored."""

from __future__ import annotations

import logging
import threading
from typing import Set

__all__ = ["once", "seen"]

logger = logging.getLogger("sync_worker.celery")
_seen: Set[str] = set()
_lock = threading.Lock()


def once(key: str, message: str) -> bool:
    """Log ``message`` at WARNING the first time ``key`` is seen in this process."""
    with _lock:
        if key in _seen:
            return False
        _seen.add(key)
    logger.warning("sync_worker_celery: %s", message)
    return True


def seen() -> Set[str]:
    with _lock:
        return set(_seen)
