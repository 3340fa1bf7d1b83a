"""Abortable, gevent-cheap connections: the request slot both transport paths share, and the
requests adapter of the control plane.

urllib3 picks a pooled connection deep inside ``urlopen``; to shut down the socket of the
request a given thread is making, each connection records itself in a thread-local slot when it
starts sending (:class:`RequestSlot`). Under gevent, ``threading.local`` is patched to be
greenlet-local. The worker plane's ``http.client`` pool (:mod:`.stdlib_pool`) hands its
connection to the slot itself.
"""

from __future__ import annotations

import ipaddress
import select
import socket
import ssl
import sys
import threading
from typing import Any, Callable, Optional

import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

__all__ = ["TRACKED_POOLS", "RequestSlot", "TrackedAdapter", "active", "readable_now"]

#: The slot of the abortable request this thread (greenlet) is making, if any.
active = threading.local()


class RequestSlot:
    """The connection currently serving one abortable request.

    No lock: :meth:`attach` writes the connection then reads ``aborted``, :meth:`abort` writes
    ``aborted`` then reads the connection, so at least one of them sees the other's write and
    the socket is shut down (perhaps twice, which is harmless). One request makes one slot, so
    this is on every request's path.
    """

    __slots__ = ("aborted", "answering", "connection")

    def __init__(self) -> None:
        self.connection: Any = None
        self.aborted = False
        #: the response's head has been read (the stdlib pool's exchange sets it)
        self.answering = False

    def attach(self, connection: Any) -> None:
        self.connection = connection
        if self.aborted:
            _shutdown(connection)

    def abort(self) -> None:
        self.aborted = True
        connection = self.connection
        if connection is not None:
            _shutdown(connection)

    def abort_unless_answered(self) -> bool:
        """Abort, unless the response is arriving; ``True``: it is (its head was read, or bytes of it
        wait on the socket), nothing was done.

        A long poll cancelled at shutdown: the server may have leased a task and sent its answer an
        instant before, and the polling thread (greenlet) not have read it (all) yet. Shutting the
        socket down would throw that lease away (the task then waits for the lease to expire);
        letting the read finish hands the task to the worker, whose drain runs it. The caller bounds
        the read (:meth:`abort` after a grace). Data waiting on a socket whose request was not sent
        yet is only possible as the peer's close, which the read then meets as an error.
        """
        connection = self.connection
        if self.answering and connection is not None:
            return True
        sock = getattr(connection, "sock", None) if connection is not None else None
        if sock is not None:
            try:
                if readable_now(sock):
                    return True
            except (OSError, ValueError):  # closed meanwhile: nothing to keep
                pass
        self.abort()
        return False


def _shutdown(connection: Any) -> None:
    sock = getattr(connection, "sock", None)
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


_native_poll: Optional[Callable[[], Any]] = None
_READABLE = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP if hasattr(select, "poll") else 0


def native_poller(sock: Any) -> Optional[Any]:
    """A native ``select.poll`` object watching ``sock`` for data or EOF (None without poll).

    The process's own ``poll`` even under gevent: with a zero timeout it cannot block, and it
    avoids setting up a hub watcher for every check (the patched select costs ~20x more per call).
    """
    global _native_poll
    if _native_poll is None:
        monkey = sys.modules.get("gevent.monkey")
        original = monkey.get_original("select", "poll") if monkey is not None else None
        _native_poll = original if callable(original) else getattr(select, "poll", None)
    if _native_poll is None:  # pragma: no cover - platforms without poll
        return None
    poller = _native_poll()
    poller.register(sock.fileno(), _READABLE)
    return poller


def readable_now(sock: Any, poller: Optional[Any] = None) -> bool:
    """Whether ``sock`` has data or EOF waiting, without blocking.

    This is urllib3's "was the pooled connection dropped?" check. ``poller`` is one
    :func:`native_poller` made for ``sock`` earlier (a pooled connection keeps its own).
    """
    if poller is None:
        poller = native_poller(sock)
        if poller is None:  # pragma: no cover - platforms without poll
            return bool(select.select([sock], [], [], 0)[0])
    return bool(poller.poll(0))


class _TrackedMixin:
    @property
    def is_connected(self) -> bool:
        sock = getattr(self, "sock", None)
        if sock is None:
            return False
        try:
            return not readable_now(sock)
        except (OSError, ValueError):
            return False

    def request(self, *args: Any, **kwargs: Any) -> Any:
        slot: Optional[RequestSlot] = getattr(active, "slot", None)
        if slot is not None:
            if slot.aborted:
                raise ConnectionAbortedError("request aborted before sending")
            result = super().request(*args, **kwargs)  # type: ignore[misc]
            slot.attach(self)
            return result
        return super().request(*args, **kwargs)  # type: ignore[misc]


class _TrackedHTTPConnection(_TrackedMixin, HTTPConnection):
    pass


#: urllib3 1.26 (what botocore pins on Python 3.9) differs from 2.x in the two ways handled below.
_URLLIB3_V1 = str(getattr(urllib3, "__version__", "")).startswith("1.")


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


class _TrackedHTTPSConnection(_TrackedMixin, HTTPSConnection):
    def connect(self) -> None:
        # urllib3 1.26 drops server_hostname for an IP address (no SNI), so a caller's context
        # that checks hostnames refuses to connect ("check_hostname requires server_hostname").
        # The ssl module verifies an IP address itself and sends no SNI for it: hand it over.
        # (read through Any: urllib3 1.26's stubs, types-urllib3, do not declare these attributes)
        this: Any = self
        context: Optional[ssl.SSLContext] = this.ssl_context
        host: str = this.server_hostname or self.host
        if (not _URLLIB3_V1 or context is None or not context.check_hostname
                or getattr(self, "_tunnel_host", None) or not _is_ip_literal(host)):
            super().connect()  # type: ignore[no-untyped-call,unused-ignore]  # untyped in types-urllib3
            return
        self.sock = context.wrap_socket(this._new_conn(), server_hostname=host.strip("[]"))
        self.is_verified = True


class _EnforcedLengthMixin:
    def urlopen(self, *args: Any, **kwargs: Any) -> Any:
        # A body cut short of its Content-Length (an abort at the absolute deadline shuts the
        # socket down) is an error, not a short body: urllib3 2.x's default, 1.26's opt-in.
        kwargs.setdefault("enforce_content_length", True)
        return super().urlopen(*args, **kwargs)  # type: ignore[misc]


class _TrackedHTTPPool(_EnforcedLengthMixin, HTTPConnectionPool):
    ConnectionCls = _TrackedHTTPConnection


class _TrackedHTTPSPool(_EnforcedLengthMixin, HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection


TRACKED_POOLS = {"http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}


class TrackedAdapter(HTTPAdapter):
    """The requests adapter of the control plane, on the same abortable connections.

    With ``ssl_context`` every HTTPS connection uses that context as given: the caller's context
    decides trust, and requests' default CA bundle is never loaded into it.
    """

    def __init__(self, *args: Any, ssl_context: Optional[ssl.SSLContext] = None, **kwargs: Any) -> None:
        self.ssl_context = ssl_context  # read by init_poolmanager, which HTTPAdapter.__init__ calls
        super().__init__(*args, **kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        if self.ssl_context is not None:
            kwargs["ssl_context"] = self.ssl_context
        super().init_poolmanager(*args, **kwargs)  # type: ignore[no-untyped-call,unused-ignore]  # old types-requests
        self.poolmanager.pool_classes_by_scheme = dict(TRACKED_POOLS)
        self.poolmanager.key_fn_by_scheme = dict(self.poolmanager.key_fn_by_scheme)

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        if self.ssl_context is None or not url.lower().startswith("https"):
            super().cert_verify(conn, url, verify, cert)  # type: ignore[no-untyped-call]
            return
        conn.cert_reqs = "CERT_REQUIRED"
        conn.ca_certs = None
        conn.ca_cert_dir = None
