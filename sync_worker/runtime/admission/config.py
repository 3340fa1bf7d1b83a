"""Concurrency configuration: ``N`` (fixed), ``"adaptive"`` or a dict of knobs (adaptive).

Every knob of the sibling SDK's table is accepted in camelCase (the contract spelling,
``ramCeilingPct``) or snake_case (``ram_ceiling_pct``). Values are clamped the same way:
``max < min`` means ``max = min``; ``start`` defaults to ``min`` and is clamped to
``[min, max]``; ``ramAdmitPct`` is at most ``ramCeilingPct`` and ``ramResumePct`` at most
``ramAdmitPct``; ``admissionPollMs`` and ``growHeadroomTicks`` are at least 1;
``admissionMaxWaitMs`` is at least 0 (0 = wait as long as it takes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Optional, Union

__all__ = [
    "DEFAULTS",
    "ConcurrencyConfig",
    "ConcurrencyOption",
    "resolve_concurrency",
]

#: The knobs and their defaults (snake_case name → default).
DEFAULTS: Mapping[str, Any] = {
    "min": 1,
    "max": 32,
    "start": None,  # = min
    "ram_ceiling_pct": 85.0,
    "ram_admit_pct": 75.0,
    "ram_resume_pct": 65.0,
    "ram_admission": True,
    "admission_poll_ms": 250,
    "admission_max_wait_ms": 0,
    "grow_headroom_ticks": 3,
    "subtract_page_cache": True,
    "step_cost_tracking": True,
    "cpu_ceiling_pct": None,  # off
    "tick_ms": 2000,
}

# camelCase spelling of each knob (the snake_case spelling is the key itself).
_CAMEL = {
    "ram_ceiling_pct": "ramCeilingPct",
    "ram_admit_pct": "ramAdmitPct",
    "ram_resume_pct": "ramResumePct",
    "ram_admission": "ramAdmission",
    "admission_poll_ms": "admissionPollMs",
    "admission_max_wait_ms": "admissionMaxWaitMs",
    "grow_headroom_ticks": "growHeadroomTicks",
    "subtract_page_cache": "subtractPageCache",
    "step_cost_tracking": "stepCostTracking",
    "cpu_ceiling_pct": "cpuCeilingPct",
    "tick_ms": "tickMs",
}
# ``mode`` is accepted and ignored (a dict always means adaptive, as in the contract).
_KNOWN = set(DEFAULTS) | set(_CAMEL.values()) | {"mode"}

ConcurrencyOption = Union[int, str, Mapping[str, Any]]


@dataclass(frozen=True)
class ConcurrencyConfig:
    """Normalised concurrency settings. ``limit`` is the fixed N, or the adaptive start value."""

    mode: str  # "fixed" | "adaptive"
    limit: int
    min: int
    max: int
    ram_ceiling_pct: float = 85.0
    ram_admit_pct: float = 75.0
    ram_resume_pct: float = 65.0
    ram_admission: bool = True
    admission_poll_ms: int = 250
    admission_max_wait_ms: int = 0
    grow_headroom_ticks: int = 3
    subtract_page_cache: bool = True
    step_cost_tracking: bool = True
    cpu_ceiling_pct: Optional[float] = None
    tick_ms: int = 2000

    @property
    def adaptive(self) -> bool:
        return self.mode == "adaptive"

    @property
    def gated(self) -> bool:
        """Whether the memory admission gate acts (adaptive mode with ``ramAdmission`` on)."""
        return self.adaptive and self.ram_admission

    @property
    def capacity(self) -> int:
        """The most slots this configuration can ever grant (fixed N, or the adaptive ``max``)."""
        return self.max

    def with_limit(self, limit: int) -> ConcurrencyConfig:
        return replace(self, limit=limit)


def _pick(options: Mapping[str, Any], name: str) -> Any:
    for key in (name, _CAMEL.get(name)):
        if key is not None and key in options and options[key] is not None:
            return options[key]
    return DEFAULTS[name]


def _number(options: Mapping[str, Any], name: str) -> Optional[float]:
    value = _pick(options, name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"concurrency option {name!r} must be a number, got {value!r}")
    return float(value)


def _whole(options: Mapping[str, Any], name: str) -> Optional[int]:
    value = _number(options, name)
    if value is None:
        return None
    if value != int(value):
        raise ValueError(f"concurrency option {name!r} must be a whole number, got {value!r}")
    return int(value)


def _flag(options: Mapping[str, Any], name: str) -> bool:
    value = _pick(options, name)
    if not isinstance(value, bool):
        raise ValueError(f"concurrency option {name!r} must be true or false, got {value!r}")
    return value


def resolve_concurrency(option: ConcurrencyOption) -> ConcurrencyConfig:
    """Normalise ``N`` / ``"adaptive"`` / ``{knobs}`` (a numeric string is a fixed N, as on the CLI).

    Raises ValueError (unknown knob, wrong type, N < 1) or TypeError (another type).
    """
    if isinstance(option, bool):
        raise TypeError("concurrency must be an int, 'adaptive' or a dict of knobs, not a bool")
    if isinstance(option, int):
        if option < 1:
            raise ValueError(f"max concurrent activity tasks must be at least 1, got {option}")
        return ConcurrencyConfig("fixed", option, option, option)
    if isinstance(option, str):
        text = option.strip().lower()
        if text.isdigit():
            return resolve_concurrency(int(text))
        if text != "adaptive":
            raise ValueError(f"unknown concurrency {option!r}; expected a number, 'adaptive' or a dict of knobs")
        option = {}
    if not isinstance(option, Mapping):
        raise TypeError(f"concurrency must be an int, 'adaptive' or a dict of knobs, not {type(option).__name__}")
    unknown = sorted(str(k) for k in option if k not in _KNOWN)
    if unknown:
        raise ValueError(f"unknown concurrency option(s) {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(_KNOWN - {'mode'}))}")
    minimum = _whole(option, "min") or 1
    if minimum < 1:
        raise ValueError(f"concurrency 'min' must be at least 1, got {minimum}")
    maximum = max(minimum, _whole(option, "max") or minimum)
    start = _whole(option, "start")
    start = minimum if start is None else max(minimum, min(maximum, start))
    ceiling = _number(option, "ram_ceiling_pct")
    assert ceiling is not None
    admit = min(ceiling, _number(option, "ram_admit_pct") or 0.0)
    resume = min(admit, _number(option, "ram_resume_pct") or 0.0)
    poll = _whole(option, "admission_poll_ms")
    max_wait = _whole(option, "admission_max_wait_ms")
    ticks = _whole(option, "grow_headroom_ticks")
    tick_ms = _whole(option, "tick_ms")
    return ConcurrencyConfig(
        mode="adaptive",
        limit=start,
        min=minimum,
        max=maximum,
        ram_ceiling_pct=ceiling,
        ram_admit_pct=admit,
        ram_resume_pct=resume,
        ram_admission=_flag(option, "ram_admission"),
        admission_poll_ms=max(1, poll if poll is not None else 250),
        admission_max_wait_ms=max(0, max_wait if max_wait is not None else 0),
        grow_headroom_ticks=max(1, ticks if ticks is not None else 3),
        subtract_page_cache=_flag(option, "subtract_page_cache"),
        step_cost_tracking=_flag(option, "step_cost_tracking"),
        cpu_ceiling_pct=_number(option, "cpu_ceiling_pct"),
        tick_ms=max(1, tick_ms if tick_ms is not None else 2000),
    )
