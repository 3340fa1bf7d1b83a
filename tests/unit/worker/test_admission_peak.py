"""Peak windows over this process's real /proc figures (Linux): the learned cost of a solo task."""

from __future__ import annotations

import os
import sys

import pytest

from sync_worker.runtime.admission import AdmissionGate, MemoryProbe, resolve_concurrency
from sync_worker.runtime.admission.peak import PeakTracker, read_rss_and_hwm

MIB = 1024 * 1024

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or read_rss_and_hwm() is None,
                                reason="VmRSS/VmHWM come from Linux's /proc/self/status")


def _allocate_and_free(megabytes: int) -> None:
    """Make ``megabytes`` MiB resident (every page touched), then free them."""
    block = bytearray(megabytes * MIB)
    for offset in range(0, len(block), 4096):
        block[offset] = 1
    del block


def test_a_window_sees_an_allocation_below_an_older_higher_peak() -> None:
    _allocate_and_free(256)  # the process's high-water mark is now at least 256 MiB above its RSS
    tracker = PeakTracker()
    window = tracker.open()
    assert window is not None
    assert window.reset, "writing 5 to /proc/self/clear_refs must reset VmHWM here"
    _allocate_and_free(64)
    growth = tracker.close(window)
    assert growth is not None and 60 * MIB <= growth <= 100 * MIB, growth


def test_without_a_reset_only_a_new_high_counts() -> None:
    tracker = PeakTracker(clear_refs=os.path.join(os.sep, "nonexistent", "clear_refs"))
    _allocate_and_free(256)
    window = tracker.open()
    assert window is not None and not window.reset
    _allocate_and_free(16)
    assert tracker.close(window) is None  # under the old mark: unknown, the gate falls back to readings


def test_the_gate_learns_each_solo_run_with_no_reading_in_between() -> None:
    """The real probe (cgroup or VmRSS), six solo 48 MiB runs, nothing read while they run."""
    gate = AdmissionGate(resolve_concurrency({"start": 1, "max": 8}), probe=MemoryProbe())
    for _ in range(6):
        reservation = gate.try_reserve()
        assert reservation is not None
        reservation.start("alloc48")
        _allocate_and_free(48)
        reservation.finish()
        status = gate.status()
        assert 44 * MIB <= status.step_cost_bytes["alloc48"] <= 80 * MIB, status
        assert status.step_cost_sources["alloc48"] == "process_peak", status
