"""Waiting on a pooled connection under gevent with the hub's own primitives.

A gevent socket's ``recv`` is Python code: it tries the real socket, and when nothing is there
yet (always, for a request's answer) it arms a new ``gevent.Timeout`` (an object, a timer
watcher, ``start``/``__enter__``/``__exit__``/``close``), waits on the socket's read watcher
in the hub, then tries again. A worker makes two such waits per task.
:class:`GreenWait` keeps what the wait needs with the connection instead: the real socket, the
read watcher gevent made for it, and one timer watcher per timeout value; a wait re-arms and
stops that timer around ``hub.wait``. The first read after a request waits before it tries (the
answer is not there yet: a try would only raise ``BlockingIOError``). Everything else is
gevent's: the wait is the same hub wait, a ``shutdown``/``close`` of the gevent socket from
another greenlet cancels it the same way, and a wait that runs out raises
``socket.timeout("timed out")`` in the waiting greenlet, as gevent does.
"""

from __future__ import annotations

import socket
from typing import Any, Optional

__all__ = ["GreenWait", "green_wait_for"]


def green_wait_for(sock: Any) -> Optional[GreenWait]:
    """A :class:`GreenWait` for a gevent socket (None for any other socket: TLS keeps gevent's path)."""
    module = type(sock).__module__
    if not module.startswith("gevent.") or module.startswith("gevent.ssl") or module.startswith("gevent._ssl"):
        return None
    raw, watcher, hub = getattr(sock, "_sock", None), getattr(sock, "_read_event", None), getattr(sock, "hub", None)
    if raw is None or watcher is None or hub is None:
        return None
    from greenlet import getcurrent  # gevent is loaded: a gevent socket exists

    return GreenWait(sock, raw, watcher, hub, getcurrent)


def _expired(waiter: Any) -> None:
    waiter.throw(socket.timeout("timed out"))


class GreenWait:
    """``recv`` and ``send`` of one gevent socket, waiting in the hub without a ``Timeout`` object."""

    __slots__ = ("_getcurrent", "_hub", "_raw", "_seconds", "_sent", "_sock", "_timer", "_watcher")

    def __init__(self, sock: Any, raw: socket.socket, watcher: Any, hub: Any, getcurrent: Any) -> None:
        self._sock = sock
        self._raw = raw  # the real socket, non-blocking (gevent made it so)
        self._watcher = watcher
        self._hub = hub
        self._getcurrent = getcurrent
        self._timer: Any = None
        self._seconds: Optional[float] = None
        self._sent = False  # a request went out and its answer has not been read from yet

    def recv(self, size: int) -> bytes:
        raw = self._raw
        if self._sent:
            # The first read after a request waits before it tries: the answer is (almost) never
            # there yet, and the failed try raised a BlockingIOError (an exception with a decoded
            # strerror and a traceback entry, a few thousand instructions) every request. The hub
            # watches the socket level-triggered, so an answer already there ends the wait at once.
            self._sent = False
            if self._sock.timeout != 0.0:
                self._wait()
        while True:
            try:
                return raw.recv(size)
            except BlockingIOError:
                if self._sock.timeout == 0.0:  # a non-blocking socket does not wait (gevent's rule)
                    raise
            self._wait()

    def send(self, data: bytes) -> int:
        """One ``send``; what the kernel did not take goes through gevent's ``sendall``."""
        try:
            sent = self._raw.send(data)
        except BlockingIOError:
            sent = 0
        if sent < len(data):
            self._sock.sendall(memoryview(data)[sent:])
        self._sent = True
        return len(data)

    def _wait(self) -> None:
        watcher = self._watcher
        if watcher.callback is not None:  # gevent's own guard against two waiters on one socket
            from gevent.exceptions import ConcurrentObjectUseError

            raise ConcurrentObjectUseError(f"This socket is already used by another greenlet: {watcher.callback!r}")
        seconds = self._sock.timeout  # what the pool set with settimeout()
        if seconds is None:
            self._hub.wait(watcher)
            return
        timer = self._timer
        if timer is None or self._seconds != seconds:
            if timer is not None:
                timer.close()
            # Repeating, and re-armed with again(): a stopped timer's start() would keep counting
            # from its first start instead of from now. The wait stops it whichever way it ends.
            timer = self._timer = self._hub.loop.timer(seconds, seconds)
            self._seconds = seconds
        timer.again(_expired, self._getcurrent(), update=True)
        try:
            self._hub.wait(watcher)
        finally:
            timer.stop()

    def close(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.close()
