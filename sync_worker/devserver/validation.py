"""Validation at the door: a request the dev server accepts can never break a later read or claim.

Two layers:

* :func:`parse_json_body` refuses what no field may hold: non-finite numbers (``NaN``,
  ``Infinity``, ``1e999``), integers outside 64 bits, nesting deeper than :data:`MAX_DEPTH` — so no
  handler ever meets a ``RecursionError`` or an ``OverflowError``;
* field checks (:func:`duration`, :func:`retry_policy`) bound what a field may mean: every
  duration fits :data:`MAX_DURATION_SECONDS` (a deadline computed from it stays a valid
  timestamp), attempts are whole numbers, back-offs are finite.

Every refusal is a 4xx with a ``reason`` (``malformed_json`` or ``validation_failed``) and the
field it concerns, raised before any state changes.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Dict, List, Optional

from .util import ApiError

__all__ = [
    "MAX_DEPTH",
    "MAX_DURATION_SECONDS",
    "MAX_INTEGER",
    "MIN_INTEGER",
    "duration",
    "invalid",
    "parse_json_body",
    "retry_policy",
]

#: Deepest nesting of objects/arrays a request body may have (payloads are Avro blobs, so real
#: bodies stay shallow: a command batch is about five levels).
MAX_DEPTH = 64
#: Integers a body may carry: 64-bit, what the real server's PHP integers and Avro ``long`` hold
#: (an SDK sends 2**53 + 1 in a query result or a workflow input, and it must arrive whole).
MIN_INTEGER = -(2 ** 63)
MAX_INTEGER = 2 ** 63 - 1
#: Longest duration a timeout, delay or interval may have: 100 years.
MAX_DURATION_SECONDS = 100 * 366 * 24 * 3600


def invalid(key: str, message: str, *, status: int = 422) -> ApiError:
    """The contract's field refusal: ``validation_failed`` naming ``key``."""
    return ApiError(status, "validation_failed", f"{key} {message}", errors={key: [message]},
                    validation_errors={key: [message]})


def _malformed(message: str) -> ApiError:
    return ApiError(400, "malformed_json", message)


def _refuse_constant(name: str) -> Any:
    raise _malformed(f"request body holds the non-finite number {name}; JSON numbers must be finite")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _malformed(f"request body holds the number {text[:32]}, which is out of range")
    return value


def _parse_int(text: str) -> int:
    if len(text) > 20:
        raise _malformed(f"request body holds an integer of {len(text)} digits; integers must fit in 64 bits")
    value = int(text)
    if not MIN_INTEGER <= value <= MAX_INTEGER:
        raise _malformed(f"request body holds the integer {text}, which does not fit in 64 bits")
    return value


#: Built once (``json.loads`` with hooks builds a decoder per call): numbers checked, constants refused.
_BODY_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_parse_float, parse_int=_parse_int)

_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _depth_ok(data: bytes) -> bool:
    """Nesting depth from the raw bytes (before parsing, so the parser never recurses deeply).

    Depth can only exceed :data:`MAX_DEPTH` if there are more openers than that, which almost no
    body has: counting them is C speed. Otherwise strings are cut out (their brackets do not nest)
    and only the brackets left are walked.
    """
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return True
    depth = 0
    for byte in _STRINGS.sub(b"", data).translate(None, _NOT_BRACKETS):
        if byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > MAX_DEPTH:
                return False
        else:
            depth -= 1
    return True


def parse_json_body(data: bytes) -> Dict[str, Any]:
    """Decode a request body as a JSON object, refusing what no field may hold."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("request body is not valid UTF-8") from None
    if not _depth_ok(data):
        raise _malformed(f"request body is nested deeper than {MAX_DEPTH} levels")
    try:
        parsed = _BODY_DECODER.decode(text)
    except ApiError:
        raise
    except (ValueError, RecursionError):
        raise _malformed("request body is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise _malformed("request body must be a JSON object")
    return parsed


def duration(value: Any, key: str, *, minimum: float = 0.0, exclusive: bool = False,
             required: bool = False) -> Optional[float]:
    """A duration in seconds: a finite number in ``[minimum, MAX_DURATION_SECONDS]``; ``None`` if absent."""
    if value is None:
        if required:
            raise invalid(key, "is required")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise invalid(key, "must be a number of seconds")
    if value < minimum or (exclusive and value == minimum):
        raise invalid(key, f"must be {'>' if exclusive else '>='} {minimum:g} seconds")
    if value > MAX_DURATION_SECONDS:
        raise invalid(key, f"must be at most {MAX_DURATION_SECONDS} seconds (100 years)")
    return float(value)


def whole_duration(value: Any, key: str, *, minimum: float = 0.0, exclusive: bool = False,
                   required: bool = False) -> Optional[int]:
    """:func:`duration` rounded up to whole seconds."""
    seconds = duration(value, key, minimum=minimum, exclusive=exclusive, required=required)
    return None if seconds is None else math.ceil(seconds)


def _whole(value: Any, key: str, *, minimum: int, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not float(value).is_integer() or value < minimum:
        raise invalid(key, f"must be a whole number >= {minimum}")


def retry_policy(value: Any, key: str = "retry_policy") -> Optional[Dict[str, Any]]:
    """A retry policy whose every field the server can later use without surprise."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid(key, "must be an object")
    if "max_attempts" in value:
        _whole(value["max_attempts"], f"{key}.max_attempts", minimum=0, allow_none=True)
    for name in ("initial_interval", "initial_interval_seconds", "maximum_interval", "maximum_interval_seconds",
                 "start_to_close_timeout", "schedule_to_close_timeout"):
        if name in value:
            duration(value[name], f"{key}.{name}")
    if "backoff_coefficient" in value:
        coefficient = value["backoff_coefficient"]
        if coefficient is not None and (isinstance(coefficient, bool) or not isinstance(coefficient, (int, float))
                                        or not 1 <= coefficient <= 1000):
            raise invalid(f"{key}.backoff_coefficient", "must be a number from 1 to 1000")
    backoffs = value.get("backoff_seconds")
    if backoffs is not None:
        if not isinstance(backoffs, list):
            raise invalid(f"{key}.backoff_seconds", "must be a list of seconds")
        for index, item in enumerate(backoffs):
            duration(item, f"{key}.backoff_seconds.{index}")
    names = value.get("non_retryable_error_types")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
        raise invalid(f"{key}.non_retryable_error_types", "must be a list of strings")
    return value


def strings(value: Any, key: str) -> List[str]:
    """A list of strings (or ``[]`` for an absent field)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise invalid(key, "must be a list of strings")
    return list(value)
