"""The machine's noise during a bench run, printed beside its figures.

A fixed pure-Python workload is timed on the cores the bench uses, a few times between
measurements: on a quiet core every timing is about the same, on a shared or throttled one
they spread. :func:`report` prints min/median/max of those timings and the load average, so a
reader can tell a real difference from the machine's own swing.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Dict, List, Optional

_WORK = 200_000


def _workload() -> int:
    total = 0
    for value in range(_WORK):
        total += value & 7
    return total


class NoiseProbe:
    """Collects timings of the fixed workload (ms) and load averages over a bench run."""

    def __init__(self, core: Optional[int] = None) -> None:
        self.core = core
        self.timings: List[float] = []
        self.loads: List[float] = []

    def sample(self, repeats: int = 5) -> None:
        """Time the workload ``repeats`` times (pinned to ``core`` when given) and note the load."""
        previous = None
        if self.core is not None and hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > self.core:
            previous = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {self.core})
        try:
            for _ in range(repeats):
                started = time.perf_counter()
                _workload()
                self.timings.append(1000.0 * (time.perf_counter() - started))
        finally:
            if previous is not None:
                os.sched_setaffinity(0, previous)
        if hasattr(os, "getloadavg"):
            self.loads.append(os.getloadavg()[0])

    def summary(self) -> Dict[str, float]:
        timings = self.timings or [float("nan")]
        return {"min_ms": min(timings), "median_ms": statistics.median(timings), "max_ms": max(timings),
                "load_min": min(self.loads or [float("nan")]), "load_max": max(self.loads or [float("nan")])}

    def report(self) -> str:
        s = self.summary()
        where = f" on core {self.core}" if self.core is not None else ""
        return (f"machine noise: a fixed CPU workload took {s['min_ms']:.2f} / {s['median_ms']:.2f} / "
                f"{s['max_ms']:.2f} ms (min / median / max of {len(self.timings)}){where}, spread "
                f"x{s['max_ms'] / s['min_ms']:.2f}; load average (1 min) {s['load_min']:.2f}..{s['load_max']:.2f}")
