"""The transport: the only module that touches requests/urllib3.

What lives here:

* one ``requests.Session`` per :class:`Transport`, with a connection pool sized for the
  caller's concurrency (pollers plus slots), so a busy worker never sees urllib3's
  "connection pool is full, discarding connection";
* fork safety: a forked child gets a fresh session and pool for every transport it inherited
  (``os.register_at_fork``), so a pre-fork (``--preload``) client never shares a socket with
  its parent;
* connect and read timeouts per request (a long poll reads longer than the server holds it);
* abortable requests: a :class:`~sync_worker.cancel.CancelToken` shuts down the socket of the
  request in flight, so a thread blocked in a long poll returns at once on shutdown;
* status → typed exception (:func:`raise_for_status`);
* bounded, jittered transport retries (tenacity) for requests that are safe to repeat,
  whose waits are interruptible by the same token.

Exceptions raised from here never carry the transport library's message text (it may contain
URLs or credentials); the original is chained as ``__cause__``.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import random
import select
import socket
import ssl
import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import requests
import tenacity
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from .. import errors
from ..cancel import CancelToken
from .deadlines import watchdog
from .statuses import _body_reason, raise_for_status

logger = logging.getLogger("sync_worker.http")

POLL_ENVELOPE_MEDIA_TYPE = "application/vnd.durable-workflow.poll.v1+json"
POLL_ENVELOPE_SCHEMA = "durable-workflow.poll-transport.v1"
POLL_ACCEPT = f"{POLL_ENVELOPE_MEDIA_TYPE}, application/json;q=0.9"

# ---------------------------------------------------------------------------
# Abortable connections
#
# urllib3 picks a pooled connection deep inside ``urlopen``; to shut down the socket of the
# request a given thread is making, each connection records itself in a thread-local slot
# when it starts sending. Under gevent, ``threading.local`` is patched to be greenlet-local.

_active = threading.local()


class _RequestSlot:
    """The connection currently serving one abortable request."""

    __slots__ = ("aborted", "connection", "lock")

    def __init__(self) -> None:
        self.connection: Any = None
        self.aborted = False
        self.lock = threading.Lock()

    def attach(self, connection: Any) -> None:
        with self.lock:
            self.connection = connection
            aborted = self.aborted
        if aborted:
            _shutdown(connection)

    def abort(self) -> None:
        with self.lock:
            self.aborted = True
            connection = self.connection
        if connection is not None:
            _shutdown(connection)


def _shutdown(connection: Any) -> None:
    sock = getattr(connection, "sock", None)
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


_native_poll: Optional[Callable[[], Any]] = None


def _readable_now(sock: Any) -> bool:
    """Whether ``sock`` has data or EOF waiting, without blocking.

    This is urllib3's "was the pooled connection dropped?" check, done with the process's native
    ``select.poll``: with a zero timeout it cannot block, and under gevent it avoids setting up
    a hub watcher for every request (the patched select costs ~20x more per call).
    """
    global _native_poll
    if _native_poll is None:
        monkey = sys.modules.get("gevent.monkey")
        original = monkey.get_original("select", "poll") if monkey is not None else None
        _native_poll = original if callable(original) else getattr(select, "poll", None)
    if _native_poll is None:  # pragma: no cover - platforms without poll
        return bool(select.select([sock], [], [], 0)[0])
    poller = _native_poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


class _TrackedMixin:
    @property
    def is_connected(self) -> bool:
        sock = getattr(self, "sock", None)
        if sock is None:
            return False
        try:
            return not _readable_now(sock)
        except (OSError, ValueError):
            return False

    def request(self, *args: Any, **kwargs: Any) -> Any:
        slot: Optional[_RequestSlot] = getattr(_active, "slot", None)
        if slot is not None:
            if slot.aborted:
                raise ConnectionAbortedError("request aborted before sending")
            result = super().request(*args, **kwargs)  # type: ignore[misc]
            slot.attach(self)
            return result
        return super().request(*args, **kwargs)  # type: ignore[misc]


class _TrackedHTTPConnection(_TrackedMixin, HTTPConnection):
    pass


class _TrackedHTTPSConnection(_TrackedMixin, HTTPSConnection):
    pass


class _TrackedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _TrackedHTTPConnection


class _TrackedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection


class _Adapter(HTTPAdapter):
    """Tracked pools; with ``ssl_context`` every HTTPS connection uses that context as given.

    The caller's context decides trust: requests' default CA bundle is never loaded into it.
    """

    def __init__(self, *args: Any, ssl_context: Optional[ssl.SSLContext] = None, **kwargs: Any) -> None:
        self.ssl_context = ssl_context  # read by init_poolmanager, which HTTPAdapter.__init__ calls
        super().__init__(*args, **kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        if self.ssl_context is not None:
            kwargs["ssl_context"] = self.ssl_context
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}
        self.poolmanager.key_fn_by_scheme = dict(self.poolmanager.key_fn_by_scheme)

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        if self.ssl_context is None or not url.lower().startswith("https"):
            super().cert_verify(conn, url, verify, cert)  # type: ignore[no-untyped-call]
            return
        conn.cert_reqs = "CERT_REQUIRED"
        conn.ca_certs = None
        conn.ca_cert_dir = None


# ---------------------------------------------------------------------------
# Retry policy


class RetryMode(enum.Enum):
    """Which failures a request may be repeated after (always byte-identical)."""

    #: Safe to repeat whatever happened: reads, polls (poll_request_id), fenced task calls,
    #: signals (request_id), heartbeats.
    SAFE = "safe"
    #: Repeat only when the request provably never reached the server (connect failure).
    CONNECT_ONLY = "connect_only"
    #: Exactly one attempt (deregistration, queries).
    NEVER = "never"


@dataclass(frozen=True)
class RetryPolicy:
    """Transport retry budget: ``max_attempts`` tries, sleeps of ``min(initial·2^n, max)·U(0.75, 1.25)``."""

    max_attempts: int = 3
    initial_backoff: float = 0.1
    max_backoff: float = 5.0

    def delay(self, attempt_number: int) -> float:
        base = min(self.initial_backoff * float(2 ** max(0, attempt_number - 1)), self.max_backoff)
        return base * random.uniform(0.75, 1.25)


def _is_retryable(exc: BaseException, mode: RetryMode) -> bool:
    if mode is RetryMode.NEVER:
        return False
    if isinstance(exc, errors.TransportError):
        return mode is RetryMode.SAFE or exc.connect
    if mode is not RetryMode.SAFE or not isinstance(exc, errors.ServerError):
        return False
    if exc.status == 429:
        # A typed long-poll capacity refusal carries its own delay; the poller honours it.
        return _body_reason(exc.body) != "long_poll_capacity_exhausted"
    if exc.status == 503 and _body_reason(exc.body) in (
        "backend_unavailable", "storage_pressure", "storage_admission_unavailable", "backend_lock_pressure"
    ):
        return False  # identity-preserving refusals are handled by the caller, never blindly repeated
    return exc.status >= 500 and not isinstance(exc, errors.QueryFailed)


# ---------------------------------------------------------------------------
# The transport


@dataclass
class Response:
    """A decoded response: status, JSON body (``None`` for 204/empty) and selected headers."""

    status: int
    body: Any
    content_type: str


class Transport:
    """A pooled, abortable JSON-over-HTTP transport bound to one server origin."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        max_connections: int = 64,
        retry: Optional[RetryPolicy] = None,
        verify: Any = True,
        ssl_context: Optional[ssl.SSLContext] = None,
        max_body_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.max_connections = int(max_connections)
        self.retry = retry or RetryPolicy()
        self.verify = verify
        self.ssl_context = ssl_context
        self.max_body_bytes = max_body_bytes
        self._session = requests.Session()
        self._session.trust_env = False
        self._capacity_lock = threading.Lock()
        self._mount(self.max_connections)
        self.pid = os.getpid()
        _live_transports.add(self)

    def _reset_after_fork(self) -> None:
        """In a forked child: drop the inherited session unclosed (its sockets are the parent's)."""
        self._session = requests.Session()
        self._session.trust_env = False
        self._capacity_lock = threading.Lock()
        self._mount(self.max_connections)
        self.pid = os.getpid()

    def _mount(self, size: int) -> None:
        adapter = _Adapter(pool_connections=4, pool_maxsize=size, max_retries=0, ssl_context=self.ssl_context)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)

    def ensure_capacity(self, connections: int) -> None:
        """Grow the pool to at least ``connections`` (requests in flight finish on the old one)."""
        with self._capacity_lock:
            if connections > self.max_connections:
                self.max_connections = connections
                self._mount(connections)

    def close(self) -> None:
        self._session.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        route: str,
        headers: Mapping[str, str],
        json_body: Any = None,
        params: Optional[Mapping[str, Any]] = None,
        read_timeout: Optional[float] = None,
        retry: RetryMode = RetryMode.SAFE,
        cancel: Optional[CancelToken] = None,
        operation: str = "",
        poll: bool = False,
    ) -> Response:
        """Send one logical request (with transport retries per ``retry``) and map errors.

        ``route`` is the static route template used in logs and errors (never the concrete
        URL with ids). Raises :class:`~sync_worker.errors.WorkerShutdown` when ``cancel``
        fires, typed :class:`~sync_worker.errors.ServerError` subclasses for error statuses
        and :class:`~sync_worker.errors.TransportError` when no response arrived.
        """
        data = None if json_body is None else _dumps(json_body)

        def attempt() -> Response:
            return self._send_once(
                method, path, route=route, headers=headers, data=data, params=params,
                read_timeout=read_timeout, cancel=cancel, operation=operation, poll=poll,
            )

        if retry is RetryMode.NEVER or self.retry.max_attempts <= 1:
            return attempt()

        def sleep(seconds: float) -> None:
            if cancel is not None and cancel.wait(seconds):
                raise errors.WorkerShutdown(f"{route}: retry wait interrupted by shutdown")
            if cancel is None:
                threading.Event().wait(seconds)

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.retry.max_attempts),
            wait=lambda state: self.retry.delay(state.attempt_number),
            retry=tenacity.retry_if_exception(lambda exc: _is_retryable(exc, retry)),
            sleep=sleep,
            reraise=True,
            before_sleep=lambda state: logger.debug(
                "retrying %s after %s (attempt %d)", route,
                type(state.outcome.exception()).__name__ if state.outcome else "?", state.attempt_number,
            ),
        )
        result: Response = retrying(attempt)
        return result

    def _send_once(
        self,
        method: str,
        path: str,
        *,
        route: str,
        headers: Mapping[str, str],
        data: Optional[bytes],
        params: Optional[Mapping[str, Any]],
        read_timeout: Optional[float],
        cancel: Optional[CancelToken],
        operation: str,
        poll: bool,
    ) -> Response:
        if cancel is not None and cancel.cancelled:
            raise errors.WorkerShutdown(f"{route}: not sent, the worker is shutting down")
        slot = _RequestSlot()
        handle = cancel.add_callback(slot.abort) if cancel is not None else None
        previous = getattr(_active, "slot", None)
        _active.slot = slot
        read_budget = read_timeout or self.timeout
        timeout: Tuple[float, float] = (self.connect_timeout, read_budget)
        # The absolute deadline of this attempt: further bytes never extend it (a read timeout
        # alone applies per recv, so a dripping server could hold the request for ever).
        budget = self.connect_timeout + read_budget
        deadline = watchdog().schedule(budget, slot.abort)
        raw: Any = None
        try:
            raw = self._session.request(
                method, self.base_url + path, data=data, params=params, headers=dict(headers),
                timeout=timeout, verify=self.verify, allow_redirects=False, stream=True,
            )
            content = self._read_bounded(raw, route)
        except errors.ResponseTooLarge:
            raise
        except (requests.RequestException, ConnectionAbortedError, OSError) as exc:
            if cancel is not None and cancel.cancelled:
                raise errors.WorkerShutdown(f"{route}: interrupted by shutdown") from exc
            if deadline.fired:
                raise _deadline_error(route, budget) from exc
            if isinstance(exc, requests.RequestException):
                raise _transport_error(exc, route) from exc
            raise errors.TransportError(f"{route}: {type(exc).__name__}", route=route) from exc
        finally:
            watchdog().cancel(deadline)
            _active.slot = previous
            if cancel is not None and handle is not None:
                cancel.remove_callback(handle)
        content_type = raw.headers.get("Content-Type", "")
        status = raw.status_code
        body = _parse_body(content, content_type, status, route)
        if poll and content_type.split(";")[0].strip() == POLL_ENVELOPE_MEDIA_TYPE:
            status, body = _unwrap_poll_envelope(status, body, route)
        raise_for_status(status, body, route=route, operation=operation)
        return Response(status=status, body=body, content_type=content_type)

    def _read_bounded(self, raw: Any, route: str) -> bytes:
        """The response body, refused (and the connection closed) past ``max_body_bytes``."""
        limit = self.max_body_bytes
        declared = raw.headers.get("Content-Length")
        declared_bytes = int(declared) if declared is not None and declared.strip().isdigit() else None
        if declared_bytes is not None and declared_bytes > limit:
            raw.close()
            raise _too_large(route, limit, declared_bytes)
        chunks: List[bytes] = []
        size = 0
        for chunk in raw.iter_content(chunk_size=64 * 1024):
            size += len(chunk)
            if size > limit:
                raw.close()
                raise _too_large(route, limit, declared_bytes)
            chunks.append(chunk)
        return b"".join(chunks)


def _too_large(route: str, limit: int, declared: Optional[int]) -> errors.ResponseTooLarge:
    said = f" (declared {declared} bytes)" if declared is not None else ""
    logger.warning("%s: response body exceeds max_body_bytes=%d%s; refused without reading it whole",
                   route, limit, said)
    return errors.ResponseTooLarge(f"{route}: response body exceeds {limit} bytes{said}", route=route,
                                   limit_bytes=limit, declared_bytes=declared)


def _deadline_error(route: str, budget: float) -> errors.TransportError:
    logger.warning("%s: HTTP attempt cut at its absolute deadline of %.1f s (the server was still sending, "
                   "or silent); the request counts as failed", route, budget)
    error = errors.TransportError(f"{route}: absolute deadline of {budget:.1f}s exceeded", route=route,
                                  timeout=True)
    error.deadline_exceeded = True
    return error


_live_transports: weakref.WeakSet[Transport] = weakref.WeakSet()


def _reset_transports_after_fork() -> None:
    for transport in list(_live_transports):
        transport._reset_after_fork()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_reset_transports_after_fork)


def _dumps(value: Any) -> bytes:
    # Compact, UTF-8, NaN refused: the same bytes the failure-report budget is measured on.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _parse_body(content: bytes, content_type: str, status: int, route: str) -> Any:
    if status == 204 or not content.strip():
        return None
    try:
        return json.loads(content)
    except ValueError:
        if status >= 400:
            return content[:512].decode("utf-8", "replace")
        raise errors.ServerError(status, {"reason": "invalid_json_response"}, route=route) from None


def _unwrap_poll_envelope(status: int, body: Any, route: str) -> Tuple[int, Any]:
    def refuse(why: str) -> errors.TransportError:
        return errors.TransportError(f"{route}: invalid poll progress envelope ({why})", route=route)

    if not isinstance(body, dict) or body.get("schema") != POLL_ENVELOPE_SCHEMA:
        raise refuse("schema")
    inner = body.get("status")
    if type(inner) is not int or not 200 <= inner <= 599 or status not in (200, inner):
        raise refuse("status")
    headers = body.get("headers", {})
    if not isinstance(headers, dict) or any(
        key not in ("retry-after", "x-durable-workflow-protocol-version")
        or not isinstance(value, str) or "\r" in value or "\n" in value
        for key, value in headers.items()
    ):
        raise refuse("headers")
    if not isinstance(body.get("body"), dict):
        raise refuse("body")
    return inner, body["body"]


def _transport_error(exc: requests.RequestException, route: str) -> errors.TransportError:
    timeout = isinstance(exc, requests.Timeout)
    connect = isinstance(exc, requests.ConnectionError) and not isinstance(exc, requests.ReadTimeout) and (
        isinstance(exc, requests.ConnectTimeout) or _is_connect_failure(exc)
    )
    return errors.TransportError(f"{route}: {type(exc).__name__}", route=route, timeout=timeout, connect=connect)


def _is_connect_failure(exc: BaseException) -> bool:
    # requests wraps urllib3's NewConnectionError (the request never left this process).
    seen: Dict[int, bool] = {}
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen[id(current)] = True
        name = type(current).__name__
        if name in ("NewConnectionError", "ConnectTimeoutError", "ConnectionRefusedError"):
            return True
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            current = reason
            continue
        args = getattr(current, "args", ())
        nested = next((a for a in args if isinstance(a, BaseException)), None)
        current = nested or current.__cause__ or current.__context__
    return False
