"""``Wakeup``: what the foreground of :func:`~sync_worker.host.serve` sleeps on, without a timeout.

A socket pair written to by any signal at C level (``signal.set_wakeup_fd``: it wakes the main
thread's ``select`` even when another thread took the signal), by the Python signal handlers
once their flags are set, and by the runtime's thread when it ends. An idle worker process is
never woken to look at flags (``bench/idle_cpu.py`` counts its wake-ups); under gevent
``select`` waits on the hub.
"""

from __future__ import annotations

import select
import signal
import socket
from typing import Optional

__all__ = ["Wakeup"]

#: Outside the main thread ``set_wakeup_fd`` is refused: look every 0.1 s instead.
_FALLBACK_SECONDS = 0.1


class Wakeup:
    """One sleeper (the thread that built it), any number of wakers (signal handlers, threads)."""

    def __init__(self) -> None:
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)
        self._previous: Optional[int] = None
        self.timeout: Optional[float] = None
        try:
            self._previous = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        except (ValueError, OSError):  # not the main thread
            self.timeout = _FALLBACK_SECONDS

    def notify(self) -> None:
        """Wake the sleeper (from a signal handler or any thread; never blocks)."""
        try:
            self._write.send(b"\0")
        except OSError:  # full (a wakeup is pending anyway) or closed (the sleeper is gone)
            pass

    def wait(self) -> None:
        """Sleep until notified (or a signal arrives), then clear what woke it."""
        select.select([self._read], [], [], self.timeout)
        try:
            while self._read.recv(4096):
                pass
        except OSError:  # drained
            pass

    def close(self) -> None:
        """Give the wakeup fd back to whoever had it, and close the pair."""
        if self.timeout is None:
            try:
                signal.set_wakeup_fd(-1 if self._previous is None else self._previous)
            except (ValueError, OSError):
                pass
        self._read.close()
        self._write.close()
