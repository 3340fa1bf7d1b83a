"""Reading the CPU affinity of another process's threads (Linux ``/proc``), for the ``--cpu`` tests."""

from __future__ import annotations

import os
from typing import Dict, FrozenSet, Set

#: Whether this platform lets the tests read and set CPU affinity.
LINUX_AFFINITY = hasattr(os, "sched_getaffinity") and os.path.isdir("/proc/self/task")


def cpus(spec: str) -> Set[int]:
    """A ``Cpus_allowed_list`` value (``0-3,6``) as a set."""
    found: Set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return found


def thread_affinities(pid: int) -> Dict[int, Set[int]]:
    """Each live thread of ``pid``: the CPUs it may run on."""
    found: Dict[int, Set[int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as status:
                for line in status:
                    if line.startswith("Cpus_allowed_list:"):
                        found[int(tid)] = cpus(line.split(":", 1)[1].strip())
        except OSError:  # a thread that ended meanwhile
            pass
    return found


def distinct_affinities(pid: int) -> Set[FrozenSet[int]]:
    """The different CPU sets ``pid``'s threads may run on (one set when every thread shares it)."""
    return {frozenset(allowed) for allowed in thread_affinities(pid).values()}
