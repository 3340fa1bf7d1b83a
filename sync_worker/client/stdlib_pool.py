"""The worker plane's connection pool, on the standard library's ``http.client``.

Polls, task outcomes and heartbeats are the worker's hot path: two requests per task. A
keep-alive request through ``http.client`` costs about half the CPU of one through urllib3's
pool and a fifth of one through a ``requests`` session (``bench/worker_throughput.py``), and
the worker plane needs none of what the extra layers add (proxies, redirects, cookies,
decompression, retries inside the request: the transport retries on the failure path itself).

What this pool does, for one server origin:

* keeps idle keep-alive connections (last in, first out) up to ``size``; a request that finds
  none opens a new one, and a connection returned beyond ``size`` is closed (never a wait);
* checks a pooled connection is still open before reusing it (a zero-timeout native poll, as
  the requests path does), so a connection the server closed is never sent on;
* connects within ``connect_timeout`` (TLS handshake included), then reads with the request's
  read timeout per ``recv``; the transport's absolute deadline covers the whole attempt;
* registers the connection with the request's :class:`~sync_worker.client.connections.RequestSlot`
  before sending, so shutdown and the absolute deadline can shut its socket down mid-request;
* TLS with the caller's ``ssl.SSLContext`` as given, or one built from ``verify`` as requests
  reads it (``True``: requests' CA bundle; ``False``: no check; a path: that CA bundle/dir).

Under gevent, ``http.client`` runs on the patched socket module, so every wait yields.
"""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import threading
from collections import deque
from typing import Any, Deque, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from .connections import RequestSlot, readable_now

__all__ = ["ConnectFailed", "StdlibPool", "tls_context_for"]

#: Only these headers of a response are read by the transport.
_CONTENT_LENGTH = "Content-Length"
_CONTENT_TYPE = "Content-Type"


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
        self.size = max(1, int(size))
        self._verify = verify
        self._ssl_context = ssl_context
        self._context: Optional[ssl.SSLContext] = None
        self._context_lock = threading.Lock()
        self._idle: Deque[http.client.HTTPConnection] = deque()

    # -- connections -------------------------------------------------------------------

    def _tls(self) -> ssl.SSLContext:
        if self._context is None:
            with self._context_lock:
                if self._context is None:
                    self._context = tls_context_for(self._verify, self._ssl_context)
        return self._context

    def _open(self, connect_timeout: float, slot: RequestSlot) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection
        if self.https:
            connection = http.client.HTTPSConnection(self.host, self.port, timeout=connect_timeout,
                                                     context=self._tls())
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=connect_timeout)
        try:
            connection.connect()
        except OSError as exc:
            connection.close()
            if slot.aborted:
                raise ConnectionAbortedError("request aborted while connecting") from exc
            raise ConnectFailed(exc) from exc
        return connection

    def _acquire(self) -> Optional[http.client.HTTPConnection]:
        idle = self._idle
        while True:
            try:
                connection = idle.pop()
            except IndexError:
                return None
            sock = connection.sock
            try:
                if sock is not None and not readable_now(sock):
                    return connection
            except (OSError, ValueError):
                pass
            connection.close()  # closed (or sent something unasked) while idle: never reused

    def _release(self, connection: http.client.HTTPConnection) -> None:
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
                 read_body: Any) -> Tuple[int, str, bytes]:
        """Send one request and read its response: (status, content type, body bytes).

        ``target`` is the path and query below the origin. ``read_body(declared, chunks, close)``
        reads the body under the transport's size bound. Raises :class:`ConnectFailed` when no
        connection could be opened, ``OSError``/``http.client.HTTPException`` otherwise.
        """
        if slot.aborted:
            raise ConnectionAbortedError("request aborted before sending")
        connection = self._acquire()
        if connection is None:
            connection = self._open(connect_timeout, slot)
        reusable = False
        try:
            sock = connection.sock
            if sock is not None:
                sock.settimeout(read_timeout)
            slot.attach(connection)
            connection.request(method, self.prefix + target, body=body, headers=headers)
            response = connection.getresponse()
            declared = response.getheader(_CONTENT_LENGTH)
            content = read_body(declared, _chunks(response), connection.close)
            reusable = not response.will_close
            return response.status, response.getheader(_CONTENT_TYPE) or "", content
        finally:
            if reusable:
                self._release(connection)
            else:
                connection.close()


def _chunks(response: http.client.HTTPResponse) -> Any:
    """The body in pieces; a body cut short of its Content-Length raises ``IncompleteRead``."""
    if response.length is not None:
        # A declared length within the bound (the caller checked): one read, http.client
        # raises IncompleteRead if the connection ends before it.
        yield response.read()
        return
    while True:
        piece = response.read(64 * 1024)
        if not piece:
            return
        yield piece
