"""``celery.schedules``: ``crontab`` and ``schedule`` (intervals), as data for server schedules.

Periodic tasks are not run by a beat process here: ``beat_schedule`` becomes server-side
schedules where the server advertises them (see :mod:`.beat`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Dict, Union

from .exceptions import UnsupportedFeature

__all__ = ["crontab", "maybe_schedule", "schedule", "solar", "to_spec"]


class schedule:
    """Every ``run_every`` (seconds or a timedelta)."""

    def __init__(self, run_every: Union[float, timedelta, None] = None, relative: bool = False,
                 nowfun: Any = None, app: Any = None) -> None:
        if run_every is None:
            raise ValueError("schedule(run_every=...) is required")
        self.run_every = run_every if isinstance(run_every, timedelta) else timedelta(seconds=float(run_every))
        self.relative = relative

    @property
    def seconds(self) -> float:
        return self.run_every.total_seconds()

    def __repr__(self) -> str:
        return f"<freq: {self.run_every}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, schedule) and other.run_every == self.run_every


class crontab:
    """A cron schedule: ``crontab(minute=0, hour="*/3")``; fields are cron syntax strings or ints."""

    def __init__(self, minute: Any = "*", hour: Any = "*", day_of_week: Any = "*", day_of_month: Any = "*",
                 month_of_year: Any = "*", **kwargs: Any) -> None:
        self.minute = str(minute)
        self.hour = str(hour)
        self.day_of_week = str(day_of_week)
        self.day_of_month = str(day_of_month)
        self.month_of_year = str(month_of_year)

    @property
    def expression(self) -> str:
        """The five-field cron expression (minute hour day-of-month month day-of-week)."""
        return " ".join((self.minute, self.hour, self.day_of_month, self.month_of_year, self.day_of_week))

    def __repr__(self) -> str:
        return f"<crontab: {self.expression} (m/h/dM/MY/d)>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, crontab) and other.expression == self.expression


class solar:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeature("celery.schedules.solar is not supported; use crontab at the times you need")


def maybe_schedule(value: Any) -> Any:
    if isinstance(value, (int, float)):
        return schedule(value)
    if isinstance(value, timedelta):
        return schedule(value)
    return value


def _iso_duration(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return "PT" + (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "") + (f"{secs}S" if secs else "")


def to_spec(value: Any, timezone: Any = None) -> Dict[str, Any]:
    """The server schedule spec of a beat entry's ``schedule``: cron (in the app's timezone) or interval."""
    value = maybe_schedule(value)
    if isinstance(value, crontab):
        spec: Dict[str, Any] = {"cron_expressions": [value.expression]}
        if timezone:
            spec["timezone"] = str(timezone)
        return spec
    if isinstance(value, schedule):
        seconds = round(value.seconds)
        if seconds < 1:
            raise ValueError("schedule intervals must be at least one second")
        return {"intervals": [{"every": _iso_duration(seconds)}]}
    raise UnsupportedFeature(f"beat schedule {value!r} is not supported; use crontab(), schedule() or seconds")
