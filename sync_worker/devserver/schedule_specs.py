"""Schedule specs: validation and the next occurrence of cron expressions and intervals (pure).

A spec is ``{"cron_expressions": [...], "intervals": [{"every": "PT30M", "offset": "PT5M"}],
"timezone": "UTC"}``; the next occurrence is the earliest over all entries. Cron expressions are
evaluated by ``cronsim`` (standard five fields, evaluated in the spec's IANA timezone, so DST
is handled as cron users expect). Intervals follow the real server: an ISO-8601 duration grid
anchored at the Unix epoch plus ``offset`` (years count 365 days and months 30, as there).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

from cronsim import CronSim, CronSimError

from .util import ApiError

try:  # Python 3.9+; the IANA database comes from the OS or the tzdata package
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
except ImportError:  # pragma: no cover - every supported Python has zoneinfo
    ZoneInfo = None  # type: ignore[assignment,misc]
    ZoneInfoNotFoundError = KeyError  # type: ignore[assignment,misc]

_DURATION = re.compile(r"^P(?!$)(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?"
                       r"(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$")
_UNITS = (365 * 86400, 30 * 86400, 7 * 86400, 86400, 3600, 60, 1)
MAX_BACKFILL_FIRES = 1000
#: Any instant serves to check that an expression parses (the server's clock is not read for it).
_VALIDATION_ANCHOR = datetime(2000, 1, 1, tzinfo=timezone.utc)


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(422, "validation_failed", f"{field} {message}", errors={field: [message]},
                    validation_errors={field: [message]})


def duration_seconds(text: Any, field: str) -> float:
    """Seconds of an ISO-8601 duration such as ``PT30M`` or ``P1D`` (whole seconds, as the real server)."""
    match = _DURATION.match(text) if isinstance(text, str) and len(text) <= 64 else None
    if match is None:
        raise _invalid(field, "must be an ISO-8601 duration such as PT30M or P1D")
    seconds = sum(float(part) * unit for part, unit in zip(match.groups(), _UNITS) if part)
    if not math.isfinite(seconds):
        raise _invalid(field, "is too large")
    return seconds


def _zone(name: str) -> Any:
    if name.upper() == "UTC":
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise _invalid("spec.timezone", f"{name!r} is not a known IANA timezone") from None


def validate(spec: Any, field: str = "spec") -> Dict[str, Any]:
    """The spec as stored, or a 422 naming the first bad field."""
    if not isinstance(spec, dict):
        raise _invalid(field, "must be an object")
    crons = spec.get("cron_expressions")
    intervals = spec.get("intervals")
    tz_name = spec.get("timezone")
    if tz_name is None:
        tz_name = "UTC"
    if not isinstance(tz_name, str) or not tz_name or len(tz_name) > 64:
        raise _invalid(f"{field}.timezone", "must be an IANA timezone name")
    zone = _zone(tz_name)
    if crons is not None:
        if not isinstance(crons, list) or not all(isinstance(c, str) for c in crons):
            raise _invalid(f"{field}.cron_expressions", "must be a list of strings")
        for index, expression in enumerate(crons):
            try:
                CronSim(expression, _VALIDATION_ANCHOR.astimezone(zone))
            except (CronSimError, ValueError, KeyError, IndexError):
                raise _invalid(f"{field}.cron_expressions.{index}",
                               f"{expression!r} is not a valid cron expression") from None
    if intervals is not None:
        if not isinstance(intervals, list):
            raise _invalid(f"{field}.intervals", "must be a list")
        for index, interval in enumerate(intervals):
            if not isinstance(interval, dict):
                raise _invalid(f"{field}.intervals.{index}", "must be an object")
            if duration_seconds(interval.get("every"), f"{field}.intervals.{index}.every") < 1:
                raise _invalid(f"{field}.intervals.{index}.every", "must be at least one second")
            if interval.get("offset") is not None:
                duration_seconds(interval.get("offset"), f"{field}.intervals.{index}.offset")
    if not crons and not intervals:
        raise _invalid(field, "needs at least one cron expression or interval")
    out: Dict[str, Any] = {"timezone": tz_name}
    if crons:
        out["cron_expressions"] = list(crons)
    if intervals:
        out["intervals"] = [{k: v for k, v in i.items() if k in ("every", "offset")} for i in intervals]
    return out


def _next_cron(expression: str, after: float, zone: Any) -> Optional[float]:
    start = datetime.fromtimestamp(after, zone)
    try:
        found: datetime = next(CronSim(expression, start))
    except (StopIteration, CronSimError, ValueError):
        return None
    return found.timestamp()


def _next_interval(interval: Dict[str, Any], after: float) -> Optional[float]:
    every = duration_seconds(interval.get("every"), "every")
    offset = duration_seconds(interval["offset"], "offset") if interval.get("offset") else 0.0
    if every <= 0:
        return None
    periods = math.floor((after - offset) / every)
    return offset + (periods + 1) * every


def next_after(spec: Dict[str, Any], after: float) -> Optional[float]:
    """The first occurrence strictly after ``after`` (epoch seconds), or None."""
    zone = _zone(str(spec.get("timezone") or "UTC"))
    candidates: List[float] = []
    for expression in spec.get("cron_expressions") or []:
        found = _next_cron(expression, after, zone)
        if found is not None:
            candidates.append(found)
    for interval in spec.get("intervals") or []:
        found = _next_interval(interval, after)
        if found is not None:
            candidates.append(found)
    return min(candidates) if candidates else None


def occurrences(spec: Dict[str, Any], start: float, end: float) -> List[float]:
    """Every occurrence in ``[start, end)``, at most :data:`MAX_BACKFILL_FIRES`."""
    found: List[float] = []
    cursor = start - 1e-6  # the start itself is inclusive
    while len(found) < MAX_BACKFILL_FIRES:
        nxt = next_after(spec, cursor)
        if nxt is None or nxt >= end:
            break
        found.append(nxt)
        cursor = nxt
    return found


def parse_time(value: Any, field: str) -> float:
    """An RFC 3339 / ISO-8601 timestamp (``Z`` or an offset) as epoch seconds."""
    if not isinstance(value, str) or not value or len(value) > 64:
        raise _invalid(field, "must be an ISO-8601 timestamp")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise _invalid(field, "must be an ISO-8601 timestamp") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()
