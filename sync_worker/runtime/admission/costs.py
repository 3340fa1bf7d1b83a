"""What one task of a given type costs in memory, learned from runs that ran alone.

Usage at admission time does not yet include what an admitted task is about to allocate, so
the gate reserves each running task's learned cost. A cost is learned only from a task that
was the only one running from start to finish (with several running, attribution would be
guesswork, and an inflated number would serialise a worker forever). The estimate for a type
is the max of its last 5 solo samples; a type never seen is charged the largest cost known
for any type; with nothing learned it is 0 (the "first task runs alone" rule covers that).
"""

from __future__ import annotations

from collections import deque
from typing import Deque, Dict, Optional, Tuple

__all__ = ["COST_SAMPLES", "CostLearner"]

#: Solo samples kept per type: enough to stay conservative, few enough to forget a one-off.
COST_SAMPLES = 5


class CostLearner:
    """Per-type memory costs (bytes). Not thread-safe on its own: the gate's lock guards it."""

    def __init__(self, enabled: bool = True, samples: int = COST_SAMPLES) -> None:
        self.enabled = enabled
        self._samples = samples
        # per type: its last solo samples as (bytes, how it was measured: "process_peak" | "sampled")
        self._costs: Dict[str, Deque[Tuple[int, str]]] = {}

    @property
    def learned(self) -> bool:
        """Whether at least one cost has been measured."""
        return any(self._costs.values())

    def observe(self, name: str, cost_bytes: int, source: str = "sampled") -> None:
        if not self.enabled or not name:
            return
        self._costs.setdefault(name, deque(maxlen=self._samples)).append((max(0, int(cost_bytes)), source))

    def largest(self) -> int:
        return max((max(s)[0] for s in self._costs.values() if s), default=0)

    def estimate(self, name: Optional[str]) -> int:
        """The bytes to reserve for a task of ``name``; ``None`` means "type not known yet"."""
        if not self.enabled:
            return 0
        samples = self._costs.get(name) if name else None
        return max(samples)[0] if samples else self.largest()

    def snapshot(self) -> Dict[str, int]:
        """{type: estimated bytes} for every type learned so far."""
        return {name: max(samples)[0] for name, samples in sorted(self._costs.items()) if samples}

    def sources(self) -> Dict[str, str]:
        """{type: how its estimate (the largest kept sample) was measured}."""
        return {name: max(samples)[1] for name, samples in sorted(self._costs.items()) if samples}
