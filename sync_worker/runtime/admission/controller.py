"""The latency-gradient concurrency controller (adaptive mode), as a pure decision function.

It keeps a rolling window of the last 100 task completions (monotonic duration and ok/error)
and, on each control tick, decides the new limit. ``rtt_long`` is an EWMA of the window's
minimum duration that keeps 0.9 of its old value (slow to rise when latency inflates under
queueing); ``rtt_short`` is the window median; the gradient is ``rtt_long / rtt_short``,
at most 1. Decision order, first match wins:

1. memory usage >= ``ram_ceiling_pct`` → ``min`` in one move (``ram_ceiling``);
2. ``cpu_ceiling_pct`` set and CPU >= it → limit - 1 (``cpu_ceiling``);
3. error rate over the window > 0.2, or >= 2 stall ticks (work running, nothing completed)
   → limit - 1 (``backpressure``);
4. gradient < 0.7 → ``floor(limit * gradient)`` (``shrink``);
5. gradient >= 0.9 and saturated (running >= 0.8 x limit) and ``headroom_ticks >=
   grow_headroom_ticks`` → limit + 1 (``grow``);
6. otherwise hold.

The result is clamped to ``[min, max]``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Deque, List, Optional, Tuple

from .config import ConcurrencyConfig

__all__ = ["Decision", "LatencyWindow", "WINDOW_SIZE", "decide"]

WINDOW_SIZE = 100
RTT_LONG_KEEP = 0.9
SHRINK_BELOW = 0.7
GROW_FROM = 0.9
SATURATED_SHARE = 0.8
ERROR_RATE_LIMIT = 0.2
STALL_TICKS = 2


@dataclass(frozen=True)
class Decision:
    limit: int
    #: Why (None = hold). A rule may match without changing the limit (already at a bound).
    reason: Optional[str]


class LatencyWindow:
    """Completions of the last ``WINDOW_SIZE`` tasks and the per-tick stall counter."""

    def __init__(self, size: int = WINDOW_SIZE) -> None:
        self._window: Deque[Tuple[float, float, bool]] = deque(maxlen=size)
        self.rtt_long: Optional[float] = None
        self.completions_this_tick = 0
        self.stall_ticks = 0

    def record(self, at: float, duration: float, ok: bool) -> None:
        self._window.append((at, max(0.0, duration), ok))
        self.completions_this_tick += 1

    def end_tick(self, running: int) -> None:
        """Close one control tick: a tick with work running but nothing completed is a stall."""
        if self.completions_this_tick == 0 and running > 0:
            self.stall_ticks += 1
        else:
            self.stall_ticks = 0
        self.completions_this_tick = 0

    def _durations(self) -> List[float]:
        return sorted(d for _, d, _ in self._window)

    def gradient(self) -> Optional[float]:
        """``rtt_long / rtt_short`` clamped to at most 1; updates the EWMA (call once per tick)."""
        durations = self._durations()
        if not durations:
            return None
        lowest = durations[0]
        self.rtt_long = lowest if self.rtt_long is None else (
            RTT_LONG_KEEP * self.rtt_long + (1.0 - RTT_LONG_KEEP) * lowest)
        short = _median(durations)
        if short <= 0:
            return 1.0
        return min(1.0, self.rtt_long / short)

    def error_rate(self) -> float:
        if not self._window:
            return 0.0
        return sum(1 for _, _, ok in self._window if not ok) / len(self._window)

    def p95(self) -> Optional[float]:
        durations = self._durations()
        if not durations:
            return None
        return durations[min(len(durations) - 1, max(0, math.ceil(0.95 * len(durations)) - 1))]

    def throughput_per_min(self) -> Optional[float]:
        if len(self._window) < 2:
            return None
        span = self._window[-1][0] - self._window[0][0]
        return None if span <= 0 else len(self._window) / span * 60.0


def _median(values: List[float]) -> float:
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0


def decide(
    config: ConcurrencyConfig,
    window: LatencyWindow,
    *,
    limit: int,
    usage_pct: Optional[float],
    cpu_pct: Optional[float],
    running: int,
    headroom_ticks: int,
) -> Decision:
    """The new limit and why (``reason`` None = hold). Rules and order: see the module docstring."""
    new_limit, reason = limit, None
    if usage_pct is not None and usage_pct >= config.ram_ceiling_pct:
        new_limit, reason = config.min, "ram_ceiling"
    elif config.cpu_ceiling_pct is not None and cpu_pct is not None and cpu_pct >= config.cpu_ceiling_pct:
        new_limit, reason = limit - 1, "cpu_ceiling"
    elif window.error_rate() > ERROR_RATE_LIMIT or window.stall_ticks >= STALL_TICKS:
        new_limit, reason = limit - 1, "backpressure"
    else:
        gradient = window.gradient()
        if gradient is not None and gradient < SHRINK_BELOW:
            new_limit, reason = math.floor(limit * gradient), "shrink"
        elif (gradient is not None and gradient >= GROW_FROM and running >= SATURATED_SHARE * limit
              and headroom_ticks >= config.grow_headroom_ticks):
            new_limit, reason = limit + 1, "grow"
    new_limit = max(config.min, min(config.max, new_limit))
    return Decision(new_limit, reason)
