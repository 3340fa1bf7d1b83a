"""Request admission, in the order the parity fixture pins: auth (401), plane version (400),
namespace (404)."""

from __future__ import annotations

import hmac
import re
from typing import Any, Mapping, Optional, Tuple

from ..protocol.versions import (
    CONTROL_PLANE_VERSION,
    CONTROL_PLANE_VERSION_HEADER,
    NAMESPACE_HEADER,
    PROTOCOL_VERSION_HEADER,
    WORKER_PROTOCOL_VERSION,
    minor_of,
)
from .discovery import MINIMUM_WORKER_PROTOCOL_MINOR
from .util import ApiError

PROTOCOL_HEADER = PROTOCOL_VERSION_HEADER
CONTROL_HEADER = CONTROL_PLANE_VERSION_HEADER
_VERSION = re.compile(r"^(\d+)\.(\d+)$")
_MAX_MINOR = minor_of(WORKER_PROTOCOL_VERSION)


def plane_of(path: str) -> str:
    """``open`` (no admission), ``discovery`` (either plane), ``worker`` or ``control``."""
    if path in ("/api/health", "/api/ready"):
        return "open"
    if path == "/api/cluster/info":
        return "discovery"
    if path.startswith("/api/worker/"):
        return "worker"
    return "control"


def _check_worker_version(value: Optional[str]) -> None:
    if value is None or not value.strip():
        raise ApiError(400, "missing_protocol_version", f"the {PROTOCOL_HEADER} header is required",
                       supported_version=WORKER_PROTOCOL_VERSION)
    match = _VERSION.match(value.strip())
    if not match or int(match.group(1)) != 1 or not MINIMUM_WORKER_PROTOCOL_MINOR <= int(match.group(2)) <= _MAX_MINOR:
        raise ApiError(400, "unsupported_protocol_version",
                       f"worker protocol {value!r} is not supported (1.{MINIMUM_WORKER_PROTOCOL_MINOR}"
                       f"..{WORKER_PROTOCOL_VERSION})", requested_version=value,
                       supported_version=WORKER_PROTOCOL_VERSION)


def _check_control_version(value: Optional[str]) -> None:
    if value is None or not value.strip():
        raise ApiError(400, "missing_control_plane_version", f"the {CONTROL_HEADER} header is required",
                       supported_version=CONTROL_PLANE_VERSION)
    if value.strip() != CONTROL_PLANE_VERSION:
        raise ApiError(400, "unsupported_control_plane_version",
                       f"control plane version {value!r} is not supported (use {CONTROL_PLANE_VERSION})",
                       requested_version=value, supported_version=CONTROL_PLANE_VERSION)


def _credential(header: str) -> bytes:
    """The token of an ``Authorization: Bearer <token>`` header; the scheme is case-insensitive
    (RFC 9110 §11.1), as the real server reads it: Laravel's ``Request::bearerToken()`` finds the
    scheme with ``strripos`` (app/Auth/ConfiguredAuthProvider.php calls it). b"" when absent."""
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return b""
    return token.strip().encode("utf-8", "replace")


def _matches(supplied: bytes, token: Optional[str]) -> bool:
    return token is not None and bool(supplied) and hmac.compare_digest(supplied, token.encode("utf-8"))


def authenticate(plane: str, headers: Any, *, token: Optional[str], worker_token: Optional[str] = None,
                 control_token: Optional[str] = None) -> None:
    """Check the bearer credential for ``plane``, as the real server's role tokens do.

    ``token`` (the shared development credential) opens every plane; ``worker_token`` opens the
    worker plane and discovery; ``control_token`` (the server's operator role) opens the control
    plane and discovery. A known credential used on the wrong plane is a 403; an unknown or
    missing one a 401. With no credential configured the server is open.
    """
    if token is None and worker_token is None and control_token is None:
        return
    supplied = _credential(headers.get("Authorization") or "")
    if _matches(supplied, token):
        return
    if _matches(supplied, worker_token):
        if plane in ("worker", "discovery"):
            return
        raise ApiError(403, "forbidden", "the worker credential cannot call the control plane; "
                       "use the control-plane (operator) token", plane=plane, role="worker")
    if _matches(supplied, control_token):
        if plane in ("control", "discovery"):
            return
        raise ApiError(403, "forbidden", "the control-plane credential cannot call the worker plane; "
                       "use the worker token", plane=plane, role="operator")
    raise ApiError(401, "unauthorized", "missing or invalid bearer token", plane=plane)


def admit(path: str, headers: Any, query: Mapping[str, str], *, token: Optional[str],
          namespaces: Tuple[str, ...], worker_token: Optional[str] = None,
          control_token: Optional[str] = None) -> Tuple[str, str]:
    """Return ``(plane, namespace)`` or raise the first refusal."""
    plane = plane_of(path)
    if plane == "open":
        return plane, "default"
    authenticate(plane, headers, token=token, worker_token=worker_token, control_token=control_token)
    if plane == "worker":
        _check_worker_version(headers.get(PROTOCOL_HEADER))
    elif plane == "control":
        _check_control_version(headers.get(CONTROL_HEADER))
    elif headers.get(PROTOCOL_HEADER) is not None:
        _check_worker_version(headers.get(PROTOCOL_HEADER))
    elif headers.get(CONTROL_HEADER) is not None:
        _check_control_version(headers.get(CONTROL_HEADER))
    namespace = (headers.get(NAMESPACE_HEADER) or "").strip() or (query.get("namespace") or "").strip() or "default"
    namespace = namespace.lower()
    if namespace not in namespaces and not (path == "/api/namespaces" or path.startswith("/api/namespaces/")):
        raise ApiError(404, "namespace_not_found", f"namespace {namespace!r} was not found", namespace=namespace)
    return plane, namespace
