"""A real memory-limited cgroup for the admission-gate tests and bench (Linux, root).

cgroup v1 (``/sys/fs/cgroup/memory``) or v2 (``memory`` in the unified hierarchy's controllers):
:func:`unavailable_reason` says why neither can be created here. A :class:`MemoryCgroup` is a
fresh child with a hard limit; :meth:`MemoryCgroup.command` wraps a command so the process joins
the cgroup before it ``exec``s (all its memory is charged there from the first byte);
:meth:`MemoryCgroup.close` kills what is left in it (only processes the test started) and
removes it.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Dict, List, Optional, Sequence

__all__ = ["MemoryCgroup", "unavailable_reason"]

V1_ROOT = "/sys/fs/cgroup/memory"
V2_ROOT = "/sys/fs/cgroup"


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _version() -> Optional[str]:
    if os.path.isfile(os.path.join(V1_ROOT, "memory.limit_in_bytes")):
        return "v1"
    controllers = os.path.join(V2_ROOT, "cgroup.controllers")
    if os.path.isfile(controllers) and "memory" in _read(controllers).split():
        return "v2"
    return None


def unavailable_reason() -> Optional[str]:
    """None when a memory cgroup can be created here, else why not (for a skip message)."""
    if not os.path.isdir("/sys/fs/cgroup"):
        return "no /sys/fs/cgroup (not Linux, or cgroups not mounted)"
    version = _version()
    if version is None:
        return "no cgroup memory controller (neither v1 /sys/fs/cgroup/memory nor v2 'memory')"
    try:
        probe = MemoryCgroup(64 * 1024 * 1024)
    except OSError as error:
        return f"cannot create a cgroup {version} memory child here ({error.strerror}; needs root)"
    probe.close()
    return None


class MemoryCgroup:
    """A child memory cgroup with a hard ``limit_bytes`` (and no swap escape)."""

    def __init__(self, limit_bytes: int, name: Optional[str] = None) -> None:
        version = _version()
        if version is None:
            raise OSError(2, "no cgroup memory controller")
        self.version = version
        self.limit_bytes = limit_bytes
        self.name = name or f"sw-memgate-{uuid.uuid4().hex[:10]}"
        root = V1_ROOT if version == "v1" else V2_ROOT
        if version == "v2":
            control = os.path.join(root, "cgroup.subtree_control")
            if "memory" not in _read(control).split():
                _write(control, "+memory")
        self.path = os.path.join(root, self.name)
        os.mkdir(self.path)
        try:
            if version == "v1":
                _write(self._file("memory.limit_in_bytes"), str(limit_bytes))
                if os.path.exists(self._file("memory.memsw.limit_in_bytes")):
                    _write(self._file("memory.memsw.limit_in_bytes"), str(limit_bytes))
                _write(self._file("memory.swappiness"), "0")
            else:
                _write(self._file("memory.max"), str(limit_bytes))
                if os.path.exists(self._file("memory.swap.max")):
                    _write(self._file("memory.swap.max"), "0")
        except OSError:
            os.rmdir(self.path)
            raise

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def command(self, argv: Sequence[str]) -> List[str]:
        """``argv`` run inside this cgroup: a shell joins it, then ``exec``s the command."""
        procs = self._file("cgroup.procs")
        return ["/bin/sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh", *argv]

    def pids(self) -> List[int]:
        try:
            return [int(p) for p in _read(self._file("cgroup.procs")).split()]
        except OSError:
            return []

    def peak_bytes(self) -> Optional[int]:
        """The kernel's peak charge of this cgroup (v1 ``max_usage_in_bytes``, v2 ``memory.peak``)."""
        name = "memory.max_usage_in_bytes" if self.version == "v1" else "memory.peak"
        try:
            return int(_read(self._file(name)).strip())
        except (OSError, ValueError):
            return None

    def events(self) -> Dict[str, int]:
        """OOM kills and limit hits: {"oom_kill": n, "limit_hits": n}."""
        out = {"oom_kill": 0, "limit_hits": 0}
        if self.version == "v1":
            for line in _read(self._file("memory.oom_control")).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    out["oom_kill"] = int(value)
            out["limit_hits"] = int(_read(self._file("memory.failcnt")).strip())
        else:
            for line in _read(self._file("memory.events")).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    out["oom_kill"] = int(value)
                elif key == "max":
                    out["limit_hits"] = int(value)
        return out

    def close(self) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while True:
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def __enter__(self) -> MemoryCgroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
