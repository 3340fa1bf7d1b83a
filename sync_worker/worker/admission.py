"""Moved to :mod:`sync_worker.runtime.admission` (this documented path keeps working)."""

from __future__ import annotations

from ..runtime.admission import (
    DEFAULTS,
    AdmissionGate,
    ConcurrencyConfig,
    ConcurrencyOption,
    ConcurrencyStatus,
    ControlLoop,
    CostLearner,
    Decision,
    LatencyWindow,
    LimitAdjustment,
    MemoryProbe,
    MemoryReading,
    Reservation,
    cgroup_v1_memory_dir,
    cgroup_v2_memory_dir,
    decide,
    resolve_concurrency,
    start_control_loop,
)

__all__ = [
    "DEFAULTS",
    "AdmissionGate",
    "ConcurrencyConfig",
    "ConcurrencyOption",
    "ConcurrencyStatus",
    "ControlLoop",
    "CostLearner",
    "Decision",
    "LatencyWindow",
    "LimitAdjustment",
    "MemoryProbe",
    "MemoryReading",
    "Reservation",
    "cgroup_v1_memory_dir",
    "cgroup_v2_memory_dir",
    "decide",
    "resolve_concurrency",
    "start_control_loop",
]
