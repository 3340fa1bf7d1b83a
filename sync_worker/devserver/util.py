"""Small shared helpers for the dev server: clock, ids, timestamps and the API error type."""

from __future__ import annotations

import base64
import re
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Dict, Optional

#: Ids the server hands out or accepts in paths: URL-safe, never percent-encoded by the SDK.
SAFE_ID = re.compile(r"^[A-Za-z0-9_.:@~-]{1,255}$")

TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled", "terminated", "continued", "timed_out"})


def now() -> float:
    """Wall-clock seconds; the one clock every deadline uses (persisted across restarts)."""
    return time.time()


def iso(ts: Optional[float]) -> Optional[str]:
    """UTC ISO-8601 with exactly six fractional digits and ``Z`` (what the SDK parses strictly)."""
    if ts is None:
        return None
    try:
        return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (OverflowError, OSError, ValueError):
        # A deadline stored by an older server past year 9999 (or NaN) must not break every read.
        return _LAST_INSTANT if not ts < 0 else _FIRST_INSTANT


_LAST_INSTANT = "9999-12-31T23:59:59.999999Z"
_FIRST_INSTANT = "1970-01-01T00:00:00.000000Z"


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def page_token(offset: int) -> str:
    return base64.b64encode(str(offset).encode("ascii")).decode("ascii")


def parse_page_token(token: Any) -> int:
    """Offset from an opaque page token; ``None``/empty means the first page."""
    if token is None or token == "":
        return 0
    if not isinstance(token, str):
        raise ApiError(400, "invalid_page_token", "next_page_token must be a string")
    try:
        value = int(base64.b64decode(token.encode("ascii"), validate=True).decode("ascii"))
    except (ValueError, UnicodeError):
        raise ApiError(400, "invalid_page_token", "next_page_token is not a token this server issued") from None
    if value < 0:
        raise ApiError(400, "invalid_page_token", "next_page_token is not a token this server issued")
    return value


class ApiError(Exception):
    """A refusal answered as ``{"error": message, "reason": reason, **extra}`` with ``status``."""

    def __init__(self, status: int, reason: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.extra: Dict[str, Any] = extra

    def body(self) -> Dict[str, Any]:
        body: Dict[str, Any] = {"error": self.message, "reason": self.reason, "message": self.message}
        body.update(self.extra)
        return body


def require_str(body: Dict[str, Any], key: str, *, optional: bool = False) -> Optional[str]:
    value = body.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ApiError(422, "validation_failed", f"{key} must be a non-empty string",
                       errors={key: ["must be a non-empty string"]},
                       validation_errors={key: ["must be a non-empty string"]})
    return value


def require_safe_id(value: str, key: str) -> str:
    if not SAFE_ID.match(value):
        raise ApiError(422, "validation_failed", f"{key} must use URL-safe characters [A-Za-z0-9_.:@~-]",
                       errors={key: ["must be URL-safe"]}, validation_errors={key: ["must be URL-safe"]})
    return value


def optional_int(body: Dict[str, Any], key: str, *, minimum: int = 0) -> Optional[int]:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ApiError(422, "validation_failed", f"{key} must be a number >= {minimum}",
                       errors={key: [f"must be a number >= {minimum}"]},
                       validation_errors={key: [f"must be a number >= {minimum}"]})
    return int(value)


_counter = [0]


def ordered_id(prefix: str) -> str:
    """A URL-safe id whose text order follows creation order (claims are first-in, first-out)."""
    _counter[0] = (_counter[0] + 1) % 1000000
    return f"{prefix}-{int(time.time() * 1000000):015x}{_counter[0]:06d}{uuid.uuid4().hex[:10]}"
