"""A buffered reader over one keep-alive socket, kept for the connection's life.

``socket.makefile("rb")`` builds a ``SocketIO`` and a ``BufferedReader`` per request (and must be
closed before the socket really closes); the worker plane makes two requests per task, so this
reader lives with the pooled connection instead. It offers the three calls :mod:`.http11` reads a
response with (``readline``, ``read``, ``read1``) and says how many received bytes are still
unread (:attr:`pending`): a connection that received more than its response is never reused.

Timeouts and errors are the socket's own (``socket.timeout``, ``OSError``); an empty ``recv``
is the end of the stream, as for a file.
"""

from __future__ import annotations

import socket
from typing import Callable, Container, Optional

__all__ = ["SocketReader"]

_RECV = 64 * 1024
#: A head longer than this is read line by line (where the per-line bounds apply as they arrive).
_HEAD_MAX = 64 * 1024


class SocketReader:
    """``readline``/``read``/``read1`` over ``sock`` with one growing buffer and a read offset."""

    __slots__ = ("_buf", "_pos", "_recv", "_sock")

    def __init__(self, sock: socket.socket, recv: Optional[Callable[[int], bytes]] = None) -> None:
        self._sock = sock
        self._recv = recv if recv is not None else sock.recv  # a connection's own wait (gevent), or the socket's
        self._buf = b""
        self._pos = 0

    @property
    def pending(self) -> int:
        """Bytes received and not read yet."""
        return len(self._buf) - self._pos

    def _fill(self) -> bool:
        data = self._recv(_RECV)
        if not data:
            return False
        pos = self._pos
        self._buf = (self._buf[pos:] + data) if pos < len(self._buf) else data
        self._pos = 0
        return True

    def take_head(self, known: Container[bytes] = ()) -> Optional[bytes]:
        """A whole response head (through its ``CRLF CRLF``) when it is in the buffer after at most
        one ``recv`` and has no bare LF (or is one of ``known``, heads taken before); else None,
        nothing consumed (read it line by line)."""
        pos = self._pos
        if pos >= len(self._buf):
            data = self._recv(_RECV)
            if not data:
                return None  # the line reader sees the end of the stream too
            self._buf, self._pos = data, 0
            pos = 0
        buf = self._buf
        end = buf.find(b"\r\n\r\n", pos)
        if end < 0 or end - pos > _HEAD_MAX:
            return None
        end += 4
        head = buf[pos:end]
        if head not in known and head.count(b"\n") != head.count(b"\r\n"):
            return None
        self._pos = end
        return head

    def readline(self, limit: int = -1) -> bytes:
        """Up to and including the next ``\\n``; at most ``limit`` bytes (``-1``: no limit)."""
        start = self._pos
        while True:
            buf = self._buf
            end = buf.find(b"\n", start)
            if end >= 0 and (limit < 0 or end - self._pos < limit):
                line = buf[self._pos:end + 1]
                self._pos = end + 1
                return line
            if 0 <= limit <= len(buf) - self._pos:
                line = buf[self._pos:self._pos + limit]
                self._pos += limit
                return line
            scanned = len(buf) - self._pos
            if not self._fill():
                line = self._buf[self._pos:]
                self._pos = len(self._buf)
                return line
            start = scanned  # the buffer now starts at the old read offset

    def read(self, size: int) -> bytes:
        """``size`` bytes, or fewer only when the stream ended first."""
        available = len(self._buf) - self._pos
        if available >= size:
            data = self._buf[self._pos:self._pos + size]
            self._pos += size
            return data
        parts = [self._buf[self._pos:]] if available else []
        self._buf, self._pos = b"", 0
        remaining = size - available
        while remaining > 0:
            data = self._recv(min(remaining, _RECV))
            if not data:
                break
            parts.append(data)
            remaining -= len(data)
        return b"".join(parts)

    def read1(self, size: int) -> bytes:
        """At most ``size`` bytes with at most one ``recv`` (b"" at the end of the stream)."""
        if self._pos < len(self._buf):
            data = self._buf[self._pos:self._pos + size]
            self._pos += len(data)
            return data
        return self._recv(size)
