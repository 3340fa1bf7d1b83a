"""Small shared helpers for the dev server: ids, timestamps and the API error type (the clock: ``clock``)."""

from __future__ import annotations

import base64
import math
import os
import re
import time
from datetime import datetime, timezone
from typing import Any, Dict, Optional

#: Ids the server hands out or accepts in paths: URL-safe, never percent-encoded by the SDK.
SAFE_ID = re.compile(r"^[A-Za-z0-9_.:@~-]{1,255}$")

TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled", "terminated", "continued", "timed_out"})


def iso(ts: Optional[float]) -> Optional[str]:
    """UTC ISO-8601 with exactly six fractional digits and ``Z`` (what the SDK parses strictly).

    The same text as ``datetime.fromtimestamp(ts, timezone.utc).strftime(...)`` (microseconds
    rounded half to even), with the date and time of day formatted once per second: a response
    carries several timestamps and ``strftime`` was a visible share of the server's CPU.
    """
    if ts is None:
        return None
    if _FAST_RANGE[0] <= ts < _FAST_RANGE[1]:
        fraction, whole = math.modf(ts)
        micros = round(fraction * 1e6)
        second = int(whole)
        if micros >= 1000000:
            second += 1
            micros -= 1000000
        prefix = _SECONDS.get(second)
        if prefix is None:
            if len(_SECONDS) >= 4096:
                _SECONDS.clear()
            prefix = _SECONDS[second] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{prefix}.{micros:06d}Z"
    try:
        return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (OverflowError, OSError, ValueError):
        # A deadline stored by an older server past year 9999 (or NaN) must not break every read.
        return _LAST_INSTANT if not ts < 0 else _FIRST_INSTANT


_LAST_INSTANT = "9999-12-31T23:59:59.999999Z"
_FIRST_INSTANT = "1970-01-01T00:00:00.000000Z"
_FAST_RANGE = (0.0, 253402300799.0)  # 1970 .. the last whole second of 9999: plain gmtime
_SECONDS: Dict[int, str] = {}


def new_id(prefix: str) -> str:
    """``prefix-`` and 32 random hex digits (what ``uuid4().hex`` gave, at a fifth of the cost)."""
    return f"{prefix}-{os.urandom(16).hex()}"


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
    return f"{prefix}-{int(time.time() * 1000000):015x}{_counter[0]:06d}{os.urandom(5).hex()}"
