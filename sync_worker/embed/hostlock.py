"""One embedded worker per host: an advisory file lock (``flock``) the running process holds.

A 16-process web server with ``one_per_host`` runs the workers in whichever process takes
the lock first; the others stand by and try again every few seconds, so when the holder
exits (recycled by ``max_requests``, killed, reloaded) another process takes over. The
kernel drops the lock when the holder's file descriptor closes, including on ``kill -9``.

stdlib ``fcntl.flock`` is all this needs (gunicorn and uWSGI are POSIX servers); the lock
is per open file, so a child that inherits the descriptor closes it at once
(:meth:`HostLock.forget_after_fork`) instead of sharing its parent's lock.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from typing import Optional

from .errors import EmbedConfigError

__all__ = ["HostLock", "default_lock_path"]

logger = logging.getLogger("sync_worker.embed")


def default_lock_path(key: str) -> str:
    """A lock file in the temp directory, named after ``key`` (factory and server)."""
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"sync-worker-embed-{digest}.lock")


class HostLock:
    """A non-blocking exclusive ``flock`` on ``path``; :meth:`try_acquire` never waits."""

    def __init__(self, path: str) -> None:
        try:
            import fcntl  # noqa: F401
        except ImportError:  # pragma: no cover - Windows
            raise EmbedConfigError("one_per_host needs fcntl.flock (a POSIX system)") from None
        self.path = path
        self._fd: Optional[int] = None
        self._pid = os.getpid()

    @property
    def held(self) -> bool:
        return self._fd is not None and self._pid == os.getpid()

    def try_acquire(self) -> bool:
        """Take the lock if no other process holds it; True when this process holds it."""
        import fcntl

        if self.held:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        self._fd, self._pid = fd, os.getpid()
        logger.info("process %d holds the host lock %s and runs the embedded workers", os.getpid(), self.path)
        return True

    def holder_pid(self) -> Optional[int]:
        """The pid written by the current holder (informational; may be stale)."""
        try:
            with open(self.path, encoding="ascii") as handle:
                text = handle.read().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def release(self) -> None:
        import fcntl

        fd, self._fd = self._fd, None
        if fd is None:
            return
        if self._pid == os.getpid():
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:  # pragma: no cover - closing drops it anyway
                pass
        try:
            os.close(fd)
        except OSError:  # pragma: no cover
            pass

    def forget_after_fork(self) -> None:
        """In a forked child: close the inherited descriptor without unlocking the parent's lock."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:  # pragma: no cover
                pass
