"""The worker plane's connection pool: keep-alive sockets to one origin, standard library only.

Polls, task outcomes and heartbeats are the worker's hot path: two requests per task. Each goes
on a pooled socket through :mod:`.http11` (one ``sendall`` per request, a lean response-head
reader): about 30 µs of CPU per keep-alive request, against ~80 µs through ``http.client``,
~170 µs through urllib3's pool and ~450 µs through a ``requests`` session
(``bench/worker_throughput.py``). The worker plane needs none of what the extra layers add
(proxies, redirects, cookies, decompression, retries inside the request: the transport retries
on the failure path itself).

What this pool does, for one server origin:

* keeps idle keep-alive connections (last in, first out) up to ``size``; a request that finds
  none opens a new one, and a connection returned beyond ``size`` is closed (never a wait);
* checks a pooled connection is still open before reusing it (a zero-timeout native poll, as
  the requests path does), so a connection the server closed is never sent on;
* connects within ``connect_timeout`` (TLS handshake included), then reads with the request's
  read timeout per ``recv``; the transport's absolute deadline covers the whole attempt. On
  Linux a plain TCP socket (not TLS, not gevent's) is put in blocking mode and the kernel times
  its waits out (``SO_RCVTIMEO``/``SO_SNDTIMEO``): CPython would otherwise ``poll()`` before
  every ``send`` and ``recv`` of a socket with a timeout (two system calls per request). A wait
  the kernel ends is raised as the same ``socket.timeout`` CPython raises. A request's first
  ``send`` never waits (``MSG_DONTWAIT``; a request usually fits in the socket's buffer), so a
  request whose timeout differs from the last one's sets ``SO_RCVTIMEO`` only, and
  ``SO_SNDTIMEO`` is brought up to date before a send that may wait;
* registers the connection with the request's :class:`~sync_worker.client.connections.RequestSlot`
  before sending, so shutdown and the absolute deadline can shut its socket down mid-request;
* TLS with the caller's ``ssl.SSLContext`` as given, or one built from ``verify`` as requests
  reads it (``True``: requests' CA bundle; ``False``: no check; a path: that CA bundle/dir).

Under gevent the socket module is patched, so every wait yields.
"""

from __future__ import annotations

import _socket
import os
import socket
import ssl
import struct
import sys
import threading
from collections import deque
from typing import Any, Deque, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from . import http11
from .connections import RequestSlot, native_poller, readable_now
from .green_wait import GreenWait, green_wait_for
from .sockreader import SocketReader

__all__ = ["ConnectFailed", "StdlibPool", "tls_context_for"]



class ConnectFailed(OSError):
    """The connection (TCP, or the TLS handshake) could not be opened: nothing was sent."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(type(cause).__name__)
        self.timed_out = isinstance(cause, socket.timeout)


def tls_context_for(verify: Any, ssl_context: Optional[ssl.SSLContext]) -> ssl.SSLContext:
    """The context HTTPS connections use: the caller's as given, else one from ``verify``."""
    if ssl_context is not None:
        return ssl_context
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    if isinstance(verify, str):
        if os.path.isdir(verify):
            return ssl.create_default_context(capath=verify)
        return ssl.create_default_context(cafile=verify)
    return ssl.create_default_context(cafile=_default_ca_bundle())


def _default_ca_bundle() -> Optional[str]:
    try:
        import certifi
    except ImportError:  # pragma: no cover - requests always brings certifi
        return None
    return str(certifi.where())


class StdlibPool:
    """Pooled keep-alive ``http.client`` connections to one origin."""

    def __init__(self, base_url: str, size: int, *, verify: Any = True,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        parts = urlsplit(base_url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.host_header = http11.host_header(self.host, self.port, self.https)
        self.size = max(1, int(size))
        self._verify = verify
        self._ssl_context = ssl_context
        self._context: Optional[ssl.SSLContext] = None
        self._context_lock = threading.Lock()
        self._idle: Deque[_Connection] = deque()

    # -- connections -------------------------------------------------------------------

    def _tls(self) -> ssl.SSLContext:
        if self._context is None:
            with self._context_lock:
                if self._context is None:
                    self._context = tls_context_for(self._verify, self._ssl_context)
        return self._context

    def _open(self, connect_timeout: float, slot: RequestSlot) -> _Connection:
        try:
            sock = http11.connect(self.host, self.port, connect_timeout, self._tls() if self.https else None)
        except OSError as exc:
            if slot.aborted:
                raise ConnectionAbortedError("request aborted while connecting") from exc
            raise ConnectFailed(exc) from exc
        return _Connection(sock)

    def _acquire(self) -> Optional[_Connection]:
        idle = self._idle
        while True:
            try:
                connection = idle.pop()
            except IndexError:
                return None
            try:
                if not connection.reader.pending and not connection.dropped():
                    return connection
            except (OSError, ValueError):
                pass
            connection.close()  # closed (or sent something unasked) while idle: never reused

    def _release(self, connection: _Connection) -> None:
        if len(self._idle) < self.size:
            self._idle.append(connection)
        else:
            connection.close()

    def resize(self, size: int) -> None:
        self.size = max(self.size, int(size))

    def clear(self) -> None:
        while True:
            try:
                self._idle.pop().close()
            except IndexError:
                return

    # -- one exchange ------------------------------------------------------------------

    def exchange(self, method: str, target: str, headers: Mapping[str, str], body: Optional[bytes], *,
                 connect_timeout: float, read_timeout: float, slot: RequestSlot,
                 read_body: Any, body_limit: int = -1) -> Tuple[int, str, bytes]:
        """Send one request and read its response: (status, content type, body bytes).

        ``target`` is the path and query below the origin. ``read_body(declared, chunks, close)``
        reads the body under the transport's size bound; a body whose declared length is at most
        ``body_limit`` is read whole without it. Raises :class:`ConnectFailed` when no
        connection could be opened, ``OSError``/``http.client.HTTPException`` otherwise.
        """
        if slot.aborted:
            raise ConnectionAbortedError("request aborted before sending")
        connection = self._acquire()
        if connection is None:
            connection = self._open(connect_timeout, slot)
        reusable = False
        try:
            if connection.timeout != read_timeout:  # a system call each time
                connection.set_timeout(read_timeout)
            slot.attach(connection)
            data = http11.request_bytes(method, self.prefix + target, self.host_header, headers, body)
            try:
                # One send() usually takes the whole request; gevent's sendall() would first ask the
                # kernel for the send buffer size (a system call and a chunking loop) on every request.
                green = connection.green
                if green is not None:
                    green.send(data)
                else:
                    connection.send(data)
                response = http11.read_response(connection.reader)
                slot.answering = True
                content = response.read_within(body_limit)
                if content is None:
                    content = read_body(response.content_length, response.chunks(), connection.close)
            except BlockingIOError as exc:  # a kernel-timed wait ran out (EAGAIN on a blocking socket)
                raise socket.timeout("timed out") from exc
            reusable = not response.will_close
            return response.status, response.content_type, content
        finally:
            slot.connection = None  # detached before the pool may lend it again (see RequestSlot)
            if reusable:
                self._release(connection)
            else:
                connection.close()


#: Whether the kernel can time a socket's waits out with a ``struct timeval`` of two longs.
_KERNEL_TIMEOUTS = sys.platform.startswith("linux") and hasattr(socket, "SO_RCVTIMEO") and hasattr(
    socket, "MSG_DONTWAIT")


def _kernel_timed(sock: socket.socket) -> bool:
    """A plain stdlib TCP socket: not TLS (its reads may need writes), not gevent's (it waits in
    its hub, and its own ``_sock`` is non-blocking)."""
    return _KERNEL_TIMEOUTS and isinstance(sock, _socket.socket) and not isinstance(sock, ssl.SSLSocket)


_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)


def _timeval(seconds: float) -> bytes:
    """``seconds`` as the ``struct timeval`` of ``SO_RCVTIMEO``/``SO_SNDTIMEO`` (never (0, 0): no timeout)."""
    whole = int(seconds)
    micros = max(0 if whole else 1, int((seconds - whole) * 1e6))
    return struct.pack("@ll", whole, micros)


class _Connection:
    """One pooled socket (``sock`` is what a request slot shuts down on abort)."""

    __slots__ = ("_blocking", "_kernel_timed", "_poller", "_send_timeout", "green", "reader", "sock", "timeout")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._kernel_timed = _kernel_timed(sock)
        #: under gevent (plain TCP), waits made with the hub's primitives (see :mod:`.green_wait`)
        self.green: Optional[GreenWait] = None if self._kernel_timed else green_wait_for(sock)
        # the reader lives with the socket: no makefile per request
        self.reader = SocketReader(sock, self.green.recv if self.green is not None else None)
        self.timeout: Optional[float] = None  # the socket's timeout as last set
        self._send_timeout: Optional[float] = None  # a kernel-timed socket's SO_SNDTIMEO as last set
        self._blocking = False  # a kernel-timed socket put in blocking mode
        self._poller: Any = None

    def set_timeout(self, seconds: float) -> None:
        """Each ``send``/``recv`` may wait ``seconds``: timed by the kernel on a blocking socket
        where it can (no ``poll()`` before each call), else by CPython (``settimeout``).

        On a kernel-timed socket this sets the receive timeout only: a request's first ``send``
        (:meth:`send`) never waits, and the send timeout is brought up to date before a send that may.
        """
        if self._kernel_timed and seconds > 0:
            sock = self.sock
            if not self._blocking:
                sock.settimeout(None)  # blocking: CPython waits in the call itself
                self._blocking = True
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(seconds))
        else:
            self.sock.settimeout(seconds)
            self._blocking = False
        self.timeout = seconds

    def send(self, data: bytes) -> None:
        """Send ``data`` on a socket that is not gevent's, waiting at most :attr:`timeout` per ``send``.

        A kernel-timed socket first sends without waiting (``MSG_DONTWAIT``: a request usually fits
        in the socket's buffer at once); what is left goes with ``sendall`` under the send timeout."""
        sock = self.sock
        if not self._blocking:
            sent = sock.send(data)
        else:
            try:
                sent = sock.send(data, _DONTWAIT)
            except BlockingIOError:
                sent = 0
            if sent < len(data) and self._send_timeout != self.timeout:
                timeout = self.timeout
                assert timeout is not None
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(timeout))
                self._send_timeout = timeout
        if sent < len(data):
            sock.sendall(memoryview(data)[sent:])

    def dropped(self) -> bool:
        """Whether the idle connection has data or EOF waiting (closed, or sent something unasked)."""
        poller = self._poller
        if poller is None:
            poller = self._poller = native_poller(self.sock)
            if poller is None:  # pragma: no cover - platforms without poll
                return readable_now(self.sock)
        return bool(poller.poll(0))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        if self.green is not None:
            self.green.close()
