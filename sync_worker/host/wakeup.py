"""``Wakeup``: what the foreground of :func:`~sync_worker.host.serve` sleeps on, without a timeout.

A socket pair written to by any signal at C level (``signal.set_wakeup_fd``: it wakes the main
thread's ``select`` even when another thread took the signal), by the Python signal handlers
once their flags are set, and by the runtime's thread when it ends. An idle worker process is
never woken to look at flags (``bench/idle_cpu.py`` counts its wake-ups); under gevent
``select`` waits on the hub.
"""

from __future__ import annotations

import contextlib
import select
import signal
import socket
from typing import Any, Callable, Iterator, List, Optional, Sequence

__all__ = ["Wakeup", "until_stop_signal"]

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


@contextlib.contextmanager
def until_stop_signal(signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[Callable[[], None]]:
    """Install handlers for ``signals`` (the previous ones are put back on exit) and yield a
    ``wait()`` that sleeps until one of them arrives: what a foreground server (``sync-worker
    devserver``, ``manage.py durable_devserver``) runs on its main thread.

    The handlers only set a plain flag and write to the :class:`Wakeup`: a handler that set a
    ``threading.Event`` could deadlock, because it runs on the main thread between two bytecodes,
    possibly while that thread holds the event's own lock inside ``Event.wait`` (seen as a dev
    server that ignored SIGTERM on a loaded machine).
    """
    wakeup = Wakeup()
    received: List[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)
        wakeup.notify()

    previous = {sig: signal.signal(sig, on_signal) for sig in signals}

    def wait() -> None:
        while not received:
            wakeup.wait()

    try:
        yield wait
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        wakeup.close()
