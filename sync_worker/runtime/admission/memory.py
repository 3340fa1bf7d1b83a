"""Where the gate's memory numbers come from: current usage (never the peak) and the ceiling.

Usage, best source first (the label is published as the status' ``memory_source``):

1. cgroup v2 ``memory.current`` - ``memory.stat`` ``inactive_file`` → ``cgroup_v2_working_set``
   (``cgroup_v2_current`` without the subtraction);
2. cgroup v1 ``memory.usage_in_bytes`` - ``total_inactive_file`` (else ``inactive_file``)
   → ``cgroup_v1_working_set`` (``cgroup_v1_usage`` without it);
3. ``/proc/self/status`` ``VmRSS`` → ``proc_vmrss`` (this process only);
4. ``getrusage().ru_maxrss`` → ``rusage_maxrss_peak``, a last resort: a peak never falls;
5. else ``unavailable``; an injected reader is ``custom``.

Inactive file pages are clean, reclaimable cache: subtracting them gives the "working set"
kubelet evicts on. The subtraction only happens when ``0 <= inactive < usage``. The charge is
read fresh every time; ``memory.stat`` (which the kernel builds, the costly read) is re-read when
the last value is older than ``stat_max_age`` (0.25 s): reclaimable cache moves slowly next to the
anonymous allocations that kill a process, and those show in the charge at once.

The ceiling: cgroup v2 ``memory.max``, then cgroup v1 ``memory.limit_in_bytes``, then physical
RAM; ``max`` or any value >= 2**62 means unlimited. It is read once.

The cgroup directory is resolved once and used for both usage and ceiling, so the ratio never
mixes two cgroups. Unlike the sibling SDK, the v1 directory is resolved too (the ``memory``
line of ``/proc/self/cgroup`` under the v1 mount), so a worker placed in a child cgroup of a
host without cgroup namespaces reads its own cgroup, not the host root. A limit set only on
an ancestor cgroup is not found (the ceiling then falls back to physical RAM).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

from .peak import PROCESS_PEAKS, PeakTracker, read_small_file

__all__ = [
    "MemoryProbe",
    "MemoryReading",
    "cgroup_v1_memory_dir",
    "cgroup_v2_memory_dir",
    "read_peak_rss",
]

CGROUP_V2_ROOT = "/sys/fs/cgroup"
CGROUP_V1_MEMORY_ROOT = "/sys/fs/cgroup/memory"
PROC_SELF_CGROUP = "/proc/self/cgroup"
PROC_SELF_STATUS = "/proc/self/status"
_UNLIMITED = 1 << 62


@dataclass(frozen=True)
class MemoryReading:
    """One usage reading: bytes (None when unreadable) and the source that gave them."""

    usage_bytes: Optional[int]
    source: str


def _read_text(path: str) -> Optional[str]:
    data = read_small_file(path, limit=1024 * 1024)
    if data is None:
        return None
    try:
        return data.decode("ascii")
    except ValueError:
        return None


def _read_int(path: str) -> Optional[int]:
    text = _read_text(path)
    if text is None:
        return None
    text = text.strip()
    if not text or text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _stat_field(text: str, fields: Tuple[str, ...]) -> Optional[int]:
    """The first of ``fields`` present in a ``key value`` file's text (searched, not parsed whole:
    this runs on every admission)."""
    padded = "\n" + text
    for name in fields:
        at = padded.find(f"\n{name} ")
        if at < 0:
            continue
        start = at + len(name) + 2
        end = padded.find("\n", start)
        try:
            return int(padded[start:] if end < 0 else padded[start:end])
        except ValueError:
            return None
    return None


def _proc_cgroup_lines(proc_cgroup: str) -> Dict[str, str]:
    """``/proc/self/cgroup`` as {controller list: path}; the unified line has the key ``""``."""
    lines: Dict[str, str] = {}
    for line in (_read_text(proc_cgroup) or "").splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) == 3:
            lines[parts[1]] = parts[2]
    return lines


def cgroup_v2_memory_dir(root: str = CGROUP_V2_ROOT, proc_cgroup: str = PROC_SELF_CGROUP) -> Optional[str]:
    """The cgroup v2 directory with this process's memory files, or None when there is no v2 memory."""
    if os.path.exists(os.path.join(root, "memory.current")):
        return root
    relative = _proc_cgroup_lines(proc_cgroup).get("")
    if relative is not None:
        candidate = os.path.join(root, relative.lstrip("/")) if relative.strip("/") else root
        if os.path.exists(os.path.join(candidate, "memory.current")):
            return candidate
    return None


def cgroup_v1_memory_dir(root: str = CGROUP_V1_MEMORY_ROOT, proc_cgroup: str = PROC_SELF_CGROUP) -> Optional[str]:
    """This process's cgroup v1 memory directory (its own child cgroup when visible), or None."""
    for controllers, relative in _proc_cgroup_lines(proc_cgroup).items():
        if "memory" in controllers.split(","):
            candidate = os.path.join(root, relative.lstrip("/")) if relative.strip("/") else root
            if os.path.exists(os.path.join(candidate, "memory.usage_in_bytes")):
                return candidate
    if os.path.exists(os.path.join(root, "memory.usage_in_bytes")):
        return root
    return None


def read_peak_rss() -> Optional[int]:
    """The process high-water RSS in bytes (``ru_maxrss`` is KiB on Linux, bytes on macOS)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return None
    try:
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (OSError, ValueError):  # pragma: no cover - defensive
        return None
    if peak_kib <= 0:
        return None
    return int(peak_kib) if sys.platform == "darwin" else int(peak_kib) * 1024  # macOS reports bytes


def _physical_ram() -> Optional[int]:
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):  # pragma: no cover - non-POSIX
        return None
    return pages * page_size if pages > 0 and page_size > 0 else None


class MemoryProbe:
    """Reads current usage and the ceiling from the best source this machine has.

    Every path is a parameter so tests can point it at a fake tree. ``usage_reader`` /
    ``limit_reader`` replace the file readers entirely (the source is then ``custom``).
    """

    def __init__(
        self,
        *,
        subtract_page_cache: bool = True,
        v2_root: str = CGROUP_V2_ROOT,
        v1_root: str = CGROUP_V1_MEMORY_ROOT,
        proc_cgroup: str = PROC_SELF_CGROUP,
        proc_status: str = PROC_SELF_STATUS,
        usage_reader: Optional[Callable[[], Optional[int]]] = None,
        limit_reader: Optional[Callable[[], Optional[int]]] = None,
        peak_reader: Optional[Callable[[], Optional[int]]] = None,
        peaks: Optional[PeakTracker] = None,
        physical_ram: Optional[Callable[[], Optional[int]]] = None,
        stat_max_age: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.subtract_page_cache = subtract_page_cache
        self.stat_max_age = stat_max_age
        self._clock = clock
        self._inactive: Optional[Tuple[float, Optional[int]]] = None
        self.v2_dir = cgroup_v2_memory_dir(v2_root, proc_cgroup)
        self.v1_dir = None if self.v2_dir is not None else cgroup_v1_memory_dir(v1_root, proc_cgroup)
        self._proc_status = proc_status
        self._usage_reader = usage_reader
        self._limit_reader = limit_reader
        self._peak_reader = peak_reader or read_peak_rss
        # peak windows (cost learning) read this process's real figures unless the usage is injected
        self.peaks: Optional[PeakTracker] = peaks if peaks is not None else (
            PROCESS_PEAKS if usage_reader is None else None)
        self._physical_ram = physical_ram or _physical_ram
        self._limit: Optional[int] = None
        self._limit_source = "unavailable"
        self._limit_read = False

    # -- usage -------------------------------------------------------------------------------

    def usage(self) -> MemoryReading:
        """Current usage and its source; never raises (a failing reader reads as ``unavailable``)."""
        if self._usage_reader is not None:
            try:
                value = self._usage_reader()
            except Exception:  # a host-supplied reader must not take the worker down
                value = None
            return MemoryReading(value if value is None else int(value), "custom")
        if self.v2_dir is not None:
            reading = self._cgroup(os.path.join(self.v2_dir, "memory.current"),
                                   os.path.join(self.v2_dir, "memory.stat"), ("inactive_file",), "cgroup_v2")
            if reading is not None:
                return reading
        if self.v1_dir is not None:
            reading = self._cgroup(os.path.join(self.v1_dir, "memory.usage_in_bytes"),
                                   os.path.join(self.v1_dir, "memory.stat"),
                                   ("total_inactive_file", "inactive_file"), "cgroup_v1")
            if reading is not None:
                return reading
        rss = self._vmrss()
        if rss is not None:
            return MemoryReading(rss, "proc_vmrss")
        peak = self.peak()
        if peak is not None:
            return MemoryReading(peak, "rusage_maxrss_peak")
        return MemoryReading(None, "unavailable")

    def _cgroup(self, usage_path: str, stat_path: str, fields: Tuple[str, ...], label: str) -> Optional[MemoryReading]:
        usage = _read_int(usage_path)
        if usage is None or usage <= 0:
            return None
        if self.subtract_page_cache:
            inactive = self._inactive_file(stat_path, fields)
            if inactive is not None and 0 <= inactive < usage:
                return MemoryReading(usage - inactive, f"{label}_working_set")
        return MemoryReading(usage, f"{label}_current" if label == "cgroup_v2" else f"{label}_usage")

    def _inactive_file(self, stat_path: str, fields: Tuple[str, ...]) -> Optional[int]:
        now = self._clock()
        cached = self._inactive
        if cached is not None and now - cached[0] <= self.stat_max_age:
            return cached[1]
        value = _stat_field(_read_text(stat_path) or "", fields)
        self._inactive = (now, value)
        return value

    def _vmrss(self) -> Optional[int]:
        for line in (_read_text(self._proc_status) or "").splitlines():
            if line.startswith("VmRSS:"):
                parts = line.split()
                try:
                    return int(parts[1]) * 1024 if len(parts) >= 2 else None
                except ValueError:
                    return None
        return None

    def peak(self) -> Optional[int]:
        """The process's never-falling peak RSS (the usage source of last resort)."""
        try:
            return self._peak_reader()
        except Exception:
            return None

    # -- ceiling -----------------------------------------------------------------------------

    def limit(self) -> Optional[int]:
        """The ceiling in bytes (read once); None only when nothing at all is readable."""
        if not self._limit_read:
            self._limit, self._limit_source = self._read_limit()
            self._limit_read = True
        return self._limit

    @property
    def limit_source(self) -> str:
        self.limit()
        return self._limit_source

    def _read_limit(self) -> Tuple[Optional[int], str]:
        if self._limit_reader is not None:
            try:
                value = self._limit_reader()
            except Exception:
                value = None
            return (int(value) if value is not None and value > 0 else None), "custom"
        if self.v2_dir is not None:
            value = _read_int(os.path.join(self.v2_dir, "memory.max"))
            if value is not None and 0 < value < _UNLIMITED:
                return value, "cgroup_v2_memory_max"
        if self.v1_dir is not None:
            value = _read_int(os.path.join(self.v1_dir, "memory.limit_in_bytes"))
            if value is not None and 0 < value < _UNLIMITED:
                return value, "cgroup_v1_limit"
        try:
            ram = self._physical_ram()
        except Exception:
            ram = None
        return (ram, "physical_ram") if ram else (None, "unavailable")
