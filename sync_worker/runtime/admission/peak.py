"""How far a task running alone raised this process's resident memory: peak windows.

A solo task's learned cost must be its peak, not what the gate happened to read while it ran. A
task that allocates 200 MB, holds it for half a second and frees it shows nothing to a reading
taken just before or just after it, and the control loop ticks every 2 s; on a busy machine (or
under gevent, where the tick is a greenlet that waits for the task's greenlet to yield) the few
readings taken in between may all miss it. The process's never-falling ``ru_maxrss`` only sees a
run that beats every earlier one, so it taught the gate nothing after the first run.

Linux keeps the process's resident high-water mark (``VmHWM`` in ``/proc/self/status``) and lets
the process set it back to its current RSS by writing ``5`` to ``/proc/self/clear_refs`` (kernel
4.0+). A window opens by resetting the mark (only when no other window of this process is open,
so one gate never erases another's) and reading ``VmRSS`` and ``VmHWM``; it closes by reading
``VmHWM`` again. When the mark rose during the window, the new high happened after the start, so
the window's growth is exact: ``hwm_end - rss_start``. When it did not rise (an older, higher mark
that could not be reset), the growth is unknown: :meth:`PeakTracker.close` returns None and the
caller falls back to its sampled readings. The reset changes what ``VmHWM`` (and ``ru_maxrss``)
report for the process afterwards: a worker's peak RSS is then "since its last solo task".
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

__all__ = ["PeakTracker", "PeakWindow", "read_rss_and_hwm"]

PROC_SELF_STATUS = "/proc/self/status"
PROC_SELF_CLEAR_REFS = "/proc/self/clear_refs"
#: ``/proc/<pid>/clear_refs`` value that sets VmHWM back to VmRSS (Documentation/filesystems/proc.rst)
_RESET_HWM = b"5"


@dataclass(frozen=True)
class PeakWindow:
    """An open window: RSS and high-water mark when it opened, and whether the mark was reset."""

    rss_start: int
    hwm_start: int
    reset: bool


def read_small_file(path: str, limit: int = 64 * 1024) -> Optional[bytes]:
    """The bytes of a small (proc/cgroup) file, or None when it cannot be read.

    ``os.open``/``os.read``: three system calls and no ``io`` objects, where ``open()`` adds a
    stat, a seek, a tty check and a buffered reader (the gate reads on every solo task).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        parts: List[bytes] = []
        while True:
            data = os.read(fd, limit)
            if not data:
                return b"".join(parts)
            parts.append(data)
            limit -= len(data)
            if limit <= 0:
                return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_rss_and_hwm(path: str = PROC_SELF_STATUS) -> Optional[Tuple[int, int]]:
    """(VmRSS, VmHWM) in bytes from ``/proc/self/status``, or None where there is no such file."""
    text = read_small_file(path)
    if text is None:
        return None
    rss, hwm = _kib(text, b"\nVmRSS:"), _kib(text, b"\nVmHWM:")
    return (rss, hwm) if rss is not None and hwm is not None else None


def _kib(text: bytes, label: bytes) -> Optional[int]:
    """The ``label`` line's value (``VmRSS:   1234 kB``) in bytes; None when absent or unreadable."""
    start = text.find(label)
    if start < 0:
        if not text.startswith(label[1:]):
            return None
        start = -1
    start += len(label)
    end = text.find(b"\n", start)
    parts = text[start:end if end >= 0 else len(text)].split()
    try:
        return int(parts[0]) * 1024
    except (IndexError, ValueError):
        return None


class PeakTracker:
    """Opens and closes peak windows over one process's RSS figures (injectable for tests)."""

    def __init__(
        self,
        *,
        reader: Optional[Callable[[], Optional[Tuple[int, int]]]] = None,
        resetter: Optional[Callable[[], bool]] = None,
        proc_status: str = PROC_SELF_STATUS,
        clear_refs: str = PROC_SELF_CLEAR_REFS,
    ) -> None:
        self._reader = reader or (lambda: read_rss_and_hwm(proc_status))
        self._resetter = resetter
        self._clear_refs = clear_refs
        self._reset_works = True
        self._lock = threading.Lock()
        self._open = 0

    def _reset(self) -> bool:
        if self._resetter is not None:
            try:
                return bool(self._resetter())
            except Exception:
                return False
        if not self._reset_works:
            return False
        try:
            fd = os.open(self._clear_refs, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                os.write(fd, _RESET_HWM)
            finally:
                os.close(fd)
            return True
        except OSError:  # no procfs, an old kernel, a sandbox that forbids it: windows still work
            self._reset_works = False
            return False

    def open(self) -> Optional[PeakWindow]:
        """Open a window (None where the process's RSS cannot be read)."""
        with self._lock:
            alone = self._open == 0
            self._open += 1
        reset = self._reset() if alone else False
        try:
            figures = self._reader()
        except Exception:
            figures = None
        if figures is None:
            with self._lock:
                self._open -= 1
            return None
        rss, hwm = figures
        return PeakWindow(rss_start=rss, hwm_start=hwm, reset=reset)

    def close(self, window: PeakWindow) -> Optional[int]:
        """Close ``window``: the growth of the peak over the start RSS, or None when unknown."""
        with self._lock:
            self._open = max(0, self._open - 1)
        try:
            figures = self._reader()
        except Exception:
            figures = None
        if figures is None:
            return None
        hwm_end = figures[1]
        if hwm_end > window.hwm_start or (window.reset and hwm_end >= window.hwm_start):
            return max(0, hwm_end - window.rss_start)
        return None


#: The one tracker of this process's real /proc figures: every gate shares it, so a window opened
#: by one gate is never reset under it by another.
PROCESS_PEAKS = PeakTracker()
