"""Which CPU the ``sync-worker devserver`` process runs on: by default one, the one it started on.

The dev server is a threaded Python process (a thread per connection, one SQLite connection), so
only one of its threads runs Python at a time: it never uses more than about one core. Left free to
run on every core, its threads still wake on different cores, and each hand-off of the interpreter
lock between them then crosses cores. On the 2-core bench machine that overhead was over a third
of the server's CPU in ``bench/celery_delay.py``'s mixed load (a client starting tasks while a worker
polls and completes them: 1.15 ms of server CPU per task unpinned, 0.70-0.74 ms pinned, in the same
minutes; bench/README.md has the commands and the figures). Kept on one core, the threads take turns.

``--cpu auto`` (the default) pins the process to the CPU it is running on when it starts, so
several dev servers started at once spread over the cores as the kernel placed them. ``--cpu none``
leaves the affinity as inherited; ``--cpu N`` pins to core ``N``. Without a GIL (a free-threaded
CPython build) or without ``os.sched_setaffinity`` (macOS, Windows), ``auto`` leaves it alone.
Only the CLI process pins itself: an embedded :class:`~sync_worker.devserver.DevServer` shares its
host's process, whose affinity is the host's business.
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional, Set

__all__ = ["AffinityError", "apply", "current_cpu", "parse"]

#: The ``--cpu`` / ``SYNC_WORKER_DEVSERVER_CPU`` values besides a core number.
AUTO, NONE = "auto", "none"


class AffinityError(ValueError):
    """A ``--cpu`` value that cannot be applied here (malformed, a core this process may not use,
    or a platform without CPU affinity)."""


def parse(spec: str) -> str:
    """``spec`` checked and normalised: ``"auto"``, ``"none"`` or a core number as a string."""
    value = spec.strip().lower()
    if value in (AUTO, NONE):
        return value
    if not value.isdigit():
        raise AffinityError(f"--cpu takes auto, none or a core number (0, 1, ...), not {spec!r}")
    return str(int(value))


def _gil_enabled() -> bool:
    check = getattr(sys, "_is_gil_enabled", None)  # 3.13+; a free-threaded build may run without it
    return True if check is None else bool(check())


def current_cpu() -> Optional[int]:
    """The CPU the calling thread is running on (Linux's ``/proc/thread-self/stat``), or ``None``."""
    try:
        with open("/proc/thread-self/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # Field 39 of stat(5) is ``processor``; after the ``)`` closing the command name, field 3 is index 0.
    try:
        return int(fields[39 - 3])
    except (IndexError, ValueError):
        return None


def apply(spec: str) -> Optional[int]:
    """Pin this process as ``spec`` says (see the module's text); the core pinned to, or ``None``."""
    value = parse(spec)
    if value == NONE:
        return None
    setter = getattr(os, "sched_setaffinity", None)
    getter = getattr(os, "sched_getaffinity", None)
    if setter is None or getter is None:
        if value == AUTO:
            return None
        raise AffinityError(f"--cpu {value}: this platform has no CPU affinity (os.sched_setaffinity); "
                            "use --cpu none")
    allowed: Set[int] = set(getter(0))
    if value == AUTO:
        if not _gil_enabled() or len(allowed) < 2:
            return None
        core = current_cpu()
        if core is None or core not in allowed:
            core = max(allowed)
    else:
        core = int(value)
        if core not in allowed:
            raise AffinityError(f"--cpu {core}: this process may run on CPUs {sorted(allowed)} only")
    for thread in _threads():  # the threads already running, then every later one inherits it
        try:
            setter(thread, {core})
        except ProcessLookupError:  # a thread that ended meanwhile
            pass
    return core


def _threads() -> List[int]:
    """This process's thread ids (Linux ``/proc/self/task``); ``[0]`` (the calling thread) elsewhere."""
    try:
        return [int(name) for name in os.listdir("/proc/self/task")] or [0]
    except OSError:
        return [0]
