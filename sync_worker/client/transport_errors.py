"""A request that produced no HTTP response, as a :class:`~sync_worker.errors.TransportError` that
names where it was going and what went wrong in words a user can act on.

The message names the server's URL with credentials, query and fragment removed (a URL's user
info is never repeated), the method and the route, and one fixed phrase for the cause
("connection refused", "host name not resolved", "timed out", ...). It never repeats the
underlying library's text (which can carry credentials); the original stays chained as
``__cause__``.
"""

from __future__ import annotations

import socket
import ssl
from typing import Dict, Optional
from urllib.parse import urlsplit, urlunsplit

import requests

from .. import errors
from .stdlib_pool import ConnectFailed

__all__ = ["deadline_error", "direct_error", "is_connect_failure", "redacted_url", "requests_error"]


def redacted_url(base_url: str) -> str:
    """``base_url`` without user info, query or fragment (``http://u:pw@h:1/api?x`` → ``http://h:1/api``)."""
    try:
        parts = urlsplit(base_url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "<unparseable server URL>"
    return urlunsplit((parts.scheme, host + port, parts.path.rstrip("/"), "", ""))


def _where(url: str, method: Optional[str], route: str, path: Optional[str]) -> str:
    # The request's own path under the server URL (query dropped), else the route template.
    target = url + (path.split("?", 1)[0] if path is not None else route)
    return f"{method + ' ' if method else ''}{target}"


def _hint(url: str, connect: bool) -> str:
    return f" (is a Durable Workflow server listening at {url}?)" if connect else ""


def _cause_phrase(exc: BaseException) -> Optional[str]:
    """A fixed phrase for the first recognisable cause in ``exc``'s chain (None: none found)."""
    seen: Dict[int, bool] = {}
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen[id(current)] = True
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if isinstance(current, socket.gaierror):
            return "host name not resolved"
        if isinstance(current, ssl.SSLCertVerificationError):
            return "TLS certificate not trusted"
        if isinstance(current, ssl.SSLError):
            return "TLS handshake failed"
        if isinstance(current, ConnectionResetError):
            return "connection reset by the server"
        if isinstance(current, (socket.timeout, TimeoutError)):
            return "timed out"
        name = type(current).__name__
        if name in ("ConnectTimeoutError", "ConnectTimeout"):
            return "connect timed out"
        if name in ("ReadTimeoutError", "ReadTimeout"):
            return "no response before the read timeout"
        if name in ("RemoteDisconnected", "ProtocolError", "IncompleteRead", "BadStatusLine"):
            return "the server closed the connection without a complete response"
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            current = reason
            continue
        nested = next((a for a in getattr(current, "args", ()) if isinstance(a, BaseException)), None)
        current = nested or current.__cause__ or current.__context__
    return None


def is_connect_failure(exc: BaseException) -> bool:
    """requests wraps urllib3's NewConnectionError: the request never left this process."""
    seen: Dict[int, bool] = {}
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen[id(current)] = True
        if type(current).__name__ in ("NewConnectionError", "ConnectTimeoutError", "ConnectionRefusedError"):
            return True
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            current = reason
            continue
        nested = next((a for a in getattr(current, "args", ()) if isinstance(a, BaseException)), None)
        current = nested or current.__cause__ or current.__context__
    return False


def _error(url: str, method: Optional[str], route: str, what: str, *, timeout: bool, connect: bool,
           path: Optional[str]) -> errors.TransportError:
    error = errors.TransportError(f"{_where(url, method, route, path)}: {what}{_hint(url, connect)}", route=route,
                                  timeout=timeout, connect=connect)
    error.url = url
    return error


def requests_error(exc: requests.RequestException, url: str, route: str, method: Optional[str] = None,
                   path: Optional[str] = None) -> errors.TransportError:
    timeout = isinstance(exc, requests.Timeout)
    connect = isinstance(exc, requests.ConnectionError) and not isinstance(exc, requests.ReadTimeout) and (
        isinstance(exc, requests.ConnectTimeout) or is_connect_failure(exc))
    what = _cause_phrase(exc) or type(exc).__name__
    return _error(url, method, route, what, timeout=timeout, connect=connect, path=path)


def direct_error(exc: BaseException, url: str, route: str, method: Optional[str] = None,
                 path: Optional[str] = None) -> errors.TransportError:
    """The stdlib pool's failures as the same typed errors the requests path gives."""
    if isinstance(exc, ConnectFailed):
        what = _cause_phrase(exc.__cause__ or exc) or f"connect failed ({exc})"
        return _error(url, method, route, what, timeout=exc.timed_out, connect=True, path=path)
    what = _cause_phrase(exc) or type(exc).__name__
    return _error(url, method, route, what, timeout=isinstance(exc, socket.timeout), connect=False, path=path)


def deadline_error(url: str, route: str, budget: float, method: Optional[str] = None,
                   path: Optional[str] = None) -> errors.TransportError:
    error = _error(url, method, route, f"absolute deadline of {budget:.1f}s exceeded", timeout=True,
                   connect=False, path=path)
    error.deadline_exceeded = True
    return error
