"""The transport: the only code that touches HTTP libraries (with ``connections`` and ``stdlib_pool``).

What lives here:

* two paths, both abortable: a pool of keep-alive sockets (:mod:`.stdlib_pool`, :mod:`.http11`),
  the default of both planes, and a ``requests.Session`` (what ``responses``-based tests need,
  chosen per plane by the client). The
  direct path costs about a third of the worker CPU per task of the requests path
  (``bench/worker_throughput.py``);
* connection pools sized for the caller's concurrency (pollers plus slots), so a busy worker
  never closes connections it will need again ("connection pool is full");
* fork safety: a forked child gets a fresh session and pool for every transport it inherited
  (``os.register_at_fork``), so a pre-fork (``--preload``) client never shares a socket with
  its parent;
* connect and read timeouts per request (a long poll reads longer than the server holds it);
* abortable requests: a :class:`~sync_worker.cancel.CancelToken` shuts down the socket of the
  request in flight, so a thread blocked in a long poll returns at once on shutdown;
* status → typed exception (:func:`raise_for_status`);
* bounded, jittered transport retries for requests that are safe to repeat, whose waits are
  interruptible by the same token; the first attempt runs bare (no retry machinery on the
  path every request takes).

Exceptions raised from here never carry the transport library's message text (it may contain
URLs or credentials); the original is chained as ``__cause__``.
"""

from __future__ import annotations

import enum
import http.client
import json
import logging
import os
import random
import re
import ssl
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, List, Mapping, Optional, Tuple
from urllib.parse import urlencode

import requests

from .. import errors
from ..cancel import CancelToken
from .connections import RequestSlot, TrackedAdapter, active
from .deadlines import watchdog
from .repeated_json import RepeatedMembers
from .statuses import _body_reason, raise_for_status
from .stdlib_pool import StdlibPool
from .transport_errors import deadline_error, direct_error, redacted_url, requests_error

logger = logging.getLogger("sync_worker.http")

#: How long a long poll whose answer was already arriving when the worker stopped may take to be read.
POLL_ANSWER_GRACE_SECONDS = 2.0

POLL_ENVELOPE_MEDIA_TYPE = "application/vnd.durable-workflow.poll.v1+json"
POLL_ENVELOPE_SCHEMA = "durable-workflow.poll-transport.v1"
POLL_ACCEPT = f"{POLL_ENVELOPE_MEDIA_TYPE}, application/json;q=0.9"

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
        #: The server URL as errors and logs name it (no credentials, query or fragment).
        self.safe_url = redacted_url(self.base_url)
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.max_connections = int(max_connections)
        self.retry = retry or RetryPolicy()
        self.verify = verify
        self.ssl_context = ssl_context
        self.max_body_bytes = max_body_bytes
        self._fresh_pools()
        _live_transports.add(self)

    def _fresh_pools(self) -> None:
        self._session = requests.Session()
        self._session.trust_env = False
        self._capacity_lock = threading.Lock()
        self._mount(self.max_connections)
        self._direct = StdlibPool(self.base_url, self.max_connections, verify=self.verify,
                                  ssl_context=self.ssl_context)
        self.pid = os.getpid()

    def _reset_after_fork(self) -> None:
        """In a forked child: drop the inherited pools unclosed (their sockets are the parent's)."""
        self._fresh_pools()

    def _mount(self, size: int) -> None:
        adapter = TrackedAdapter(pool_connections=4, pool_maxsize=size, max_retries=0, ssl_context=self.ssl_context)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)

    def ensure_capacity(self, connections: int) -> None:
        """Grow the pools to at least ``connections`` (requests in flight finish on the old ones)."""
        with self._capacity_lock:
            if connections > self.max_connections:
                self.max_connections = connections
                self._mount(connections)
                self._direct.resize(connections)

    def close(self) -> None:
        self._session.close()
        self._direct.clear()

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
        direct: bool = False,
    ) -> Response:
        """Send one logical request (with transport retries per ``retry``) and map errors.

        ``route`` is the static route template used in logs and errors (never the concrete
        URL with ids). ``direct`` sends it on the stdlib socket pool without requests (the
        worker plane). Raises :class:`~sync_worker.errors.WorkerShutdown` when ``cancel`` fires, typed
        :class:`~sync_worker.errors.ServerError` subclasses for error statuses and
        :class:`~sync_worker.errors.TransportError` when no response arrived.
        """
        data = None if json_body is None else _dumps(json_body)
        url = path if direct else self.base_url + path  # the direct pool is bound to the origin
        if params:
            url += "?" + urlencode(params, doseq=True)
        attempts = 1 if retry is RetryMode.NEVER else max(1, self.retry.max_attempts)
        attempt_number = 1
        while True:
            try:
                return self._send_once(method, url, route=route, headers=headers, data=data,
                                       read_timeout=read_timeout, cancel=cancel, operation=operation, poll=poll,
                                       direct=direct)
            except Exception as exc:  # the failure path: decide whether to repeat the request
                if attempt_number >= attempts or not _is_retryable(exc, retry):
                    raise
                logger.debug("retrying %s after %s (attempt %d)", route, type(exc).__name__, attempt_number)
                self._retry_sleep(self.retry.delay(attempt_number), cancel, route)
                attempt_number += 1

    @staticmethod
    def _retry_sleep(seconds: float, cancel: Optional[CancelToken], route: str) -> None:
        if cancel is None:
            threading.Event().wait(seconds)
        elif cancel.wait(seconds):
            raise errors.WorkerShutdown(f"{route}: retry wait interrupted by shutdown")

    def _send_once(
        self,
        method: str,
        url: str,
        *,
        route: str,
        headers: Mapping[str, str],
        data: Optional[bytes],
        read_timeout: Optional[float],
        cancel: Optional[CancelToken],
        operation: str,
        poll: bool,
        direct: bool,
    ) -> Response:
        if cancel is not None and cancel.cancelled:
            raise errors.WorkerShutdown(f"{route}: not sent, the worker is shutting down")
        slot = RequestSlot()
        handle = None
        if cancel is not None:
            handle = cancel.add_callback(self._poll_stopper(slot) if poll else slot.abort)
        previous = None
        if not direct:  # the requests path finds the slot through the thread-local
            previous = getattr(active, "slot", None)
            active.slot = slot
        read_budget = read_timeout or self.timeout
        # The absolute deadline of this attempt: further bytes never extend it (a read timeout
        # alone applies per recv, so a dripping server could hold the request for ever).
        budget = self.connect_timeout + read_budget
        deadlines = watchdog()
        deadline = deadlines.schedule(budget, slot.abort)
        try:
            if direct:
                status, content_type, content = self._direct.exchange(
                    method, url, headers, data, connect_timeout=self.connect_timeout, read_timeout=read_budget,
                    slot=slot, body_limit=self.max_body_bytes,
                    read_body=lambda declared, chunks, close: self._bounded(route, declared, chunks, close))
            else:
                status, content_type, content = self._exchange_requests(method, url, route, headers, data,
                                                                        read_budget)
        except errors.ResponseTooLarge:
            raise
        except (requests.RequestException, http.client.HTTPException, OSError) as exc:
            if cancel is not None and cancel.cancelled:
                raise errors.WorkerShutdown(f"{route}: interrupted by shutdown") from exc
            path = url if direct else url[len(self.base_url):]
            if deadline.fired:
                raise _deadline_error(self.safe_url, route, budget, method, path) from exc
            if isinstance(exc, requests.RequestException):
                raise requests_error(exc, self.safe_url, route, method, path) from exc
            raise direct_error(exc, self.safe_url, route, method, path) from exc
        finally:
            deadlines.cancel(deadline)
            if not direct:  # (the stdlib pool detaches its connection itself, before lending it again)
                slot.connection = None  # a late abort (the poll stopper's grace) must not reach a reused one
                active.slot = previous
            if cancel is not None and handle is not None:
                cancel.remove_callback(handle)
        body = _parse_body(content, content_type, status, route, _POLL_BODIES.loads if poll else _decode)
        if poll and content_type.split(";")[0].strip() == POLL_ENVELOPE_MEDIA_TYPE:
            status, body = _unwrap_poll_envelope(status, body, route)
        if status >= 400:
            raise_for_status(status, body, route=route, operation=operation)
        return Response(status=status, body=body, content_type=content_type)

    @staticmethod
    def _poll_stopper(slot: RequestSlot) -> Callable[[], None]:
        """What a shutdown does to a long poll in flight: abort it, unless its answer is already
        waiting to be read (a task leased to this worker): that read may finish within
        :data:`POLL_ANSWER_GRACE_SECONDS` (docs/worker.md, Shutdown)."""
        def stop() -> None:
            if slot.abort_unless_answered():
                watchdog().schedule(POLL_ANSWER_GRACE_SECONDS, slot.abort)
        return stop

    def _exchange_requests(self, method: str, url: str, route: str, headers: Mapping[str, str],
                           data: Optional[bytes], read_budget: float) -> Tuple[int, str, bytes]:
        raw = self._session.request(
            method, url, data=data, headers=dict(headers), timeout=(self.connect_timeout, read_budget),
            verify=self.verify, allow_redirects=False, stream=True,
        )
        declared = raw.headers.get("Content-Length")
        content = self._bounded(route, declared, raw.iter_content(chunk_size=64 * 1024), raw.close)
        return raw.status_code, raw.headers.get("Content-Type", ""), content

    def _bounded(self, route: str, declared: Optional[str], chunks: Any, close: Callable[[], None]) -> bytes:
        """The response body, refused (and the connection closed) past ``max_body_bytes``."""
        limit = self.max_body_bytes
        declared_bytes = int(declared) if declared is not None and declared.strip().isdigit() else None
        if declared_bytes is not None and declared_bytes > limit:
            close()
            raise _too_large(route, limit, declared_bytes)
        parts: List[bytes] = []
        size = 0
        for chunk in chunks:
            size += len(chunk)
            if size > limit:
                close()
                raise _too_large(route, limit, declared_bytes)
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)


#: A string ``quote_plus`` leaves as it is (its always-safe characters).
_QUERY_SAFE = re.compile(r"[A-Za-z0-9_.~-]+").fullmatch


def query_string(params: Mapping[str, Any]) -> Optional[str]:
    """``urlencode`` (``doseq=True``) of the ``params`` that are not ``None``; ``None`` when none is.

    Exactly ``urlencode``'s text: a key or value it would leave as it is (a URL-safe string, an
    int) is written as it is, anything else goes through ``urlencode`` itself.
    """
    parts = []
    for key, value in params.items():
        if value is None:
            continue
        if type(key) is str and _QUERY_SAFE(key):
            kind = type(value)
            if kind is int:
                parts.append(f"{key}={value}")
                continue
            if kind is str and _QUERY_SAFE(value):
                parts.append(f"{key}={value}")
                continue
        piece = urlencode([(key, value)], doseq=True)
        if piece:  # an empty sequence has no pair
            parts.append(piece)
    if not parts and all(value is None for value in params.values()):
        return None
    return "&".join(parts)


def _too_large(route: str, limit: int, declared: Optional[int]) -> errors.ResponseTooLarge:
    said = f" (declared {declared} bytes)" if declared is not None else ""
    logger.warning("%s: response body exceeds max_body_bytes=%d%s; refused without reading it whole",
                   route, limit, said)
    return errors.ResponseTooLarge(f"{route}: response body exceeds {limit} bytes{said}", route=route,
                                   limit_bytes=limit, declared_bytes=declared)


def _deadline_error(url: str, route: str, budget: float, method: str, path: str) -> errors.TransportError:
    logger.warning("%s: HTTP attempt cut at its absolute deadline of %.1f s (the server was still sending, "
                   "or silent); the request counts as failed", route, budget)
    return deadline_error(url, route, budget, method, path)


_live_transports: weakref.WeakSet[Transport] = weakref.WeakSet()


def _reset_transports_after_fork() -> None:
    for transport in list(_live_transports):
        transport._reset_after_fork()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_reset_transports_after_fork)


#: Compact, UTF-8, NaN refused: the same bytes the failure-report budget is measured on (built
#: once: ``json.dumps`` with options builds an encoder per call).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_DECODER = json.JSONDecoder()
_scan_once: Callable[[str, int], Tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def _decode(text: str) -> Any:
    """``_DECODER.decode(text)``: a document that is one object or array, with no whitespace around
    it, is handed to the scanner directly (what ``decode`` does after its two whitespace matches)."""
    if text[:1] in ("{", "["):
        try:
            value, end = _scan_once(text, 0)
        except StopIteration:
            return _DECODER.decode(text)  # json's own error
        if end == len(text):
            return value
    return _DECODER.decode(text)
#: Poll answers: the ``server_capabilities`` block every one of them carries is decoded once
#: (a worker never reads it from a poll; the poll hands back ``task`` only).
_POLL_BODIES = RepeatedMembers(["server_capabilities"])


_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_c_encode_string = getattr(json.encoder, "c_encode_basestring", None)


def _dumps(value: Any) -> bytes:
    """``_ENCODER.encode(value)`` as UTF-8: the C encoder ``JSONEncoder.iterencode`` would build
    (fresh cycle markers each call), built here without its two Python frames."""
    if _c_make_encoder is None or _c_encode_string is None or isinstance(value, str):
        return _ENCODER.encode(value).encode("utf-8")
    chunks = _c_make_encoder({}, _ENCODER.default, _c_encode_string, None, ":", ",", False, False, False)(value, 0)
    return "".join(chunks).encode("utf-8")


def _parse_body(content: bytes, content_type: str, status: int, route: str,
                decode: Callable[[str], Any] = _decode) -> Any:
    """The JSON body (``None`` when empty): UTF-8 (what servers send) decoded directly with ``decode``,
    any other encoding (UTF-16/32, a BOM) through ``json.loads``'s own detection."""
    if status == 204 or not content or content.isspace():
        return None
    try:
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            return json.loads(content)
        if text[:1] == "\ufeff" or "\x00" in text[:4]:
            return json.loads(content)
        return decode(text)
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
