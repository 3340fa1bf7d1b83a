"""Memory admission gate and adaptive concurrency, reusable by any slot-based worker.

Small API (nothing here knows the Durable Workflow ``Worker``)::

    from sync_worker.runtime.admission import AdmissionGate, resolve_concurrency, start_control_loop

    gate = AdmissionGate(resolve_concurrency("adaptive"))     # or N, or {"max": 16, ...}
    loop = start_control_loop(gate, backend)                  # ticks every tick_ms
    reservation = gate.reserve("report.build", stop=stop_event.is_set)  # defers, never rejects
    reservation.start("report.build")                         # the task runs now
    try:
        ...
    finally:
        reservation.finish(ok=True)                           # or .release() if nothing ran
    gate.begin_drain(); loop.stop()                           # at shutdown
    gate.status()                                             # ConcurrencyStatus (.to_wire())
"""

from __future__ import annotations

from .config import DEFAULTS, ConcurrencyConfig, ConcurrencyOption, resolve_concurrency
from .controller import Decision, LatencyWindow, decide
from .costs import CostLearner
from .gate import AdmissionGate, ControlLoop, Reservation, start_control_loop
from .memory import MemoryProbe, MemoryReading, cgroup_v1_memory_dir, cgroup_v2_memory_dir
from .status import ConcurrencyStatus, LimitAdjustment

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
