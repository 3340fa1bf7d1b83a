"""The concurrency/memory block of ``Worker.status()`` and its camelCase wire form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

__all__ = ["ConcurrencyStatus", "LimitAdjustment"]


@dataclass(frozen=True)
class LimitAdjustment:
    """The last change of the adaptive limit: when (epoch ms), from, to, and the rule's reason."""

    at_ms: int
    from_limit: int
    to_limit: int
    reason: str

    def to_wire(self) -> Dict[str, Any]:
        return {"at": self.at_ms, "from": self.from_limit, "to": self.to_limit, "reason": self.reason}


@dataclass(frozen=True)
class ConcurrencyStatus:
    """Point-in-time concurrency and memory figures of one admission gate.

    ``in_flight`` counts running tasks; ``reserved`` also counts slots held by a poller that
    is asking the server for a task. ``gate`` is ``open`` / ``deferring`` (adaptive with the
    memory gate on) or ``off`` (fixed N, or ``ramAdmission`` false). Bytes are None when the
    machine gives no reading; ``memory_source`` says where usage came from.
    """

    mode: str
    limit: int
    min: int
    max: int
    in_flight: int
    reserved: int
    memory_source: str
    usage_bytes: Optional[int]
    ceiling_bytes: Optional[int]
    ceiling_source: str
    usage_pct: Optional[float]
    idle_usage_bytes: Optional[int]
    gate: str
    admit_pct: float
    resume_pct: float
    ceiling_pct: float
    waiting: int
    deferrals: int
    forced_admissions: int
    last_deferred_at_ms: Optional[int]
    headroom_ticks: int
    step_cost_bytes: Mapping[str, int] = field(default_factory=dict)
    #: per type, how its cost was measured: ``process_peak`` (the process's RSS high-water mark over
    #: a solo run was known, so the cost is at least that exact peak) or ``sampled`` (only the usage
    #: readings taken while it ran)
    step_cost_sources: Mapping[str, str] = field(default_factory=dict)
    last_adjust: Optional[LimitAdjustment] = None
    cpu_pct: Optional[float] = None
    p95_seconds: Optional[float] = None
    throughput_per_min: Optional[float] = None

    @property
    def available(self) -> int:
        """Slots a poller may still take now (0 while the gate defers)."""
        if self.gate == "deferring":
            return 0
        return max(0, self.limit - self.reserved)

    def to_wire(self) -> Dict[str, Any]:
        """The sibling SDK's camelCase ``WorkerStatus`` shape (for dashboards and raw beats)."""
        out: Dict[str, Any] = {
            "runtime": "python",
            "concurrency": {"mode": self.mode, "limit": self.limit, "min": self.min, "max": self.max},
            "inFlight": self.in_flight,
        }
        if self.usage_bytes is not None:
            out["rssBytes"] = self.usage_bytes
        if self.ceiling_bytes is not None:
            out["rssLimitBytes"] = self.ceiling_bytes
        if self.usage_pct is not None:
            out["rssPct"] = round(self.usage_pct, 2)
        if self.cpu_pct is not None:
            out["cpuPct"] = round(self.cpu_pct, 2)
        if self.throughput_per_min is not None:
            out["throughputPerMin"] = round(self.throughput_per_min, 2)
        if self.p95_seconds is not None:
            out["p95Ms"] = round(self.p95_seconds * 1000.0, 1)
        if self.last_adjust is not None:
            out["lastAdjust"] = self.last_adjust.to_wire()
        memory: Dict[str, Any] = {"source": self.memory_source}
        if self.idle_usage_bytes is not None:
            memory["idleUsageBytes"] = self.idle_usage_bytes
        if self.gate != "off":
            memory.update({"gate": self.gate, "admitPct": self.admit_pct, "resumePct": self.resume_pct,
                           "waiting": self.waiting, "deferrals": self.deferrals,
                           "headroomTicks": self.headroom_ticks})
            if self.last_deferred_at_ms is not None:
                memory["lastDeferredAt"] = self.last_deferred_at_ms
        if self.step_cost_bytes:
            memory["stepCostBytes"] = dict(self.step_cost_bytes)
        if self.step_cost_sources:
            memory["stepCostSource"] = dict(self.step_cost_sources)
        out["memory"] = memory
        return out
