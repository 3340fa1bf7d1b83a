"""Moved to :mod:`sync_worker.runtime.slots` (this documented path keeps working)."""

from __future__ import annotations

from ..runtime.slots import (
    Slot,
    SlotPool,
    admit,
)

__all__ = [
    "Slot",
    "SlotPool",
    "admit",
]
