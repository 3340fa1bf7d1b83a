"""The gevent backend: pollers, slots, heartbeats and deadlines on greenlets.

Selected once (``Worker(..., pool="gevent")`` or ``sync-worker run -P gevent``). The process
must have been monkey-patched *before* ``requests``, ``ssl``, ``threading`` users or the app were
imported; :func:`require_patched` refuses to start otherwise, and :func:`late_patch_report`
names the modules that were imported before the patch and may keep unpatched references.

:class:`HubMonitor` lets a real OS thread see the gevent hub stop, so a greenlet that blocks the
hub (CPU-bound work or a C call that does not yield) shows up in ``Worker.status()`` as
"not live" while it lasts.
"""

from __future__ import annotations

import logging
import os
import sys
import sysconfig
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .context_local import ContextLocal

__all__ = [
    "GeventBackend",
    "GeventNotPatched",
    "GreenletHandle",
    "HUB_MONITOR_ENV",
    "HubMonitor",
    "fully_patched",
    "hub_monitor_interval",
    "late_patch_report",
    "require_patched",
]

logger = logging.getLogger("sync_worker.worker.gevent")

# What must be cooperative for greenlet pollers and slots to work (gevent's names).
_REQUIRED_PATCHES = ("socket", "threading", "time", "select", "ssl")

# Packages whose own references to originals are intentional (gevent keeps them to do its job).
_IGNORED_PACKAGES = {"gevent", "greenlet", "_pytest", "pytest", "sync_worker"}
# The standard library's own early references are gevent's business; report third-party and app code.
_STDLIB_NAMES_KNOWN = hasattr(sys, "stdlib_module_names")  # Python 3.10+
_STDLIB_FOLDERS = tuple(sorted({os.path.realpath(sysconfig.get_paths()[key]) + os.sep
                                for key in ("stdlib", "platstdlib")}))
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {
    "functools", "reprlib", "tempfile", "socket", "ssl", "select", "selectors", "time", "threading", "os",
    "signal", "subprocess", "queue", "logging", "concurrent", "multiprocessing", "http", "urllib", "asyncio",
}


class GeventNotPatched(RuntimeError):
    """The gevent pool was asked for in a process that was not monkey-patched first."""


def _monkey() -> Any:
    try:
        from gevent import monkey
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise GeventNotPatched(
            "the gevent pool needs gevent: pip install 'sync-worker[gevent]'"
        ) from exc
    return monkey


def _unpatched(monkey: Any) -> List[str]:
    return [name for name in _REQUIRED_PATCHES if not monkey.is_module_patched(name)]


def fully_patched() -> bool:
    """Whether every module the gevent pool relies on is monkey-patched in this process."""
    if "gevent" not in sys.modules:
        return False
    try:
        return not _unpatched(_monkey())
    except GeventNotPatched:  # pragma: no cover - gevent missing
        return False


def require_patched() -> None:
    """Refuse to run greenlets in an unpatched process, saying how to fix it."""
    monkey = _monkey()
    missing = _unpatched(monkey)
    if missing:
        raise GeventNotPatched(
            "pool='gevent' needs a process monkey-patched before anything else is imported "
            f"(unpatched: {', '.join(missing)}). Start it with `sync-worker run -P gevent MODULE:ATTR`, "
            "`python -m sync_worker run -P gevent ...` or SYNC_WORKER_POOL=gevent, or call "
            "`from gevent import monkey; monkey.patch_all()` as the very first lines of your entry point."
        )


def late_patch_report() -> List[str]:
    """Modules holding references to blocking originals that the patch replaced.

    A module that ran ``from time import sleep`` or ``from socket import socket`` before the
    patch keeps the blocking original; each such reference is reported as
    ``"module.attribute (original module.name)"``. Empty when the process was patched first.
    """
    monkey = _monkey()
    originals: Dict[int, str] = {}
    for module_name, attributes in getattr(monkey, "saved", {}).items():
        for attribute, original in attributes.items():
            if callable(original) or isinstance(original, type):
                originals[id(original)] = f"{module_name}.{attribute}"
    if not originals:
        return []
    found: List[str] = []
    for module_name, module in list(sys.modules.items()):
        top = module_name.split(".")[0]
        if module is None or top in _IGNORED_PACKAGES or top in _STDLIB or top in sys.builtin_module_names:
            continue
        if not _STDLIB_NAMES_KNOWN and _in_stdlib_folder(module):
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attribute, value in list(namespace.items()):
            origin = originals.get(id(value))
            if origin is not None and not attribute.startswith("__"):
                found.append(f"{module_name}.{attribute} ({origin})")
    return sorted(found)


_TASK_GREENLET: Any = None


def _task_greenlet_class() -> Any:
    """gevent's ``Greenlet`` for task greenlets, recording no spawning stack.

    With gevent's greenlet tree tracking on (its default), every ``Greenlet`` keeps the ten
    frames that spawned it, each with its line number: CPython 3.11 finds a frame's line by
    walking its code's line table: ~26,000 instructions per task spawned from the worker's
    dispatch frames (a third of what a no-op task cost more on gevent than on threads). Task
    greenlets record none (``spawning_stack`` is None); the spawning greenlet and the spawn
    tree's locals are kept as gevent keeps them, and every other greenlet keeps its stack.
    """
    global _TASK_GREENLET
    if _TASK_GREENLET is None:
        from gevent import Greenlet

        class TaskGreenlet(Greenlet):  # type: ignore[misc]
            spawning_stack_limit = 0

        _TASK_GREENLET = TaskGreenlet
    return _TASK_GREENLET


class GreenletHandle:
    """Handle of a greenlet started by :class:`GeventBackend`."""

    def __init__(self, greenlet: Any, name: str) -> None:
        self._greenlet = greenlet
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def join(self, timeout: Optional[float] = None) -> bool:
        self._greenlet.join(timeout)
        return bool(self._greenlet.dead)

    def is_alive(self) -> bool:
        return not self._greenlet.dead

    def kill(self, block: bool = False) -> None:
        """Raise ``GreenletExit`` in the greenlet at its next cooperative point (cold stop)."""
        self._greenlet.kill(block=block)


def _in_stdlib_folder(module: Any) -> bool:
    """Python 3.9 has no ``sys.stdlib_module_names``: a module file under the standard library's
    folders (``lib-dynload`` included), outside site-packages, is the standard library's."""
    path = getattr(module, "__file__", None)
    if not isinstance(path, str):
        return False
    real = os.path.realpath(path)
    return "site-packages" not in real and "dist-packages" not in real and real.startswith(_STDLIB_FOLDERS)


# One scan per set of loaded modules: workers built again in the same process do not rescan.
_late_patch_seen: Optional[Tuple[int, Tuple[str, ...]]] = None


def _warn_if_patched_late() -> List[str]:
    """Log (once per set of loaded modules) which modules kept unpatched references."""
    global _late_patch_seen
    loaded = len(sys.modules)
    if _late_patch_seen is not None and _late_patch_seen[0] == loaded:
        return list(_late_patch_seen[1])
    report = late_patch_report()
    previous = _late_patch_seen[1] if _late_patch_seen is not None else ()
    _late_patch_seen = (loaded, tuple(report))
    if report and tuple(report) != previous:
        logger.warning(
            "gevent was patched after these modules were imported; they kept blocking originals and "
            "will block the whole hub when used: %s. Patch first: start with `sync-worker run -P gevent` "
            "or call gevent.monkey.patch_all() before any other import.",
            ", ".join(report),
        )
    return report


class GeventBackend:
    """Greenlets for everything; the same surface as the thread backend."""

    name = "gevent"

    def __init__(self) -> None:
        require_patched()
        _warn_if_patched_late()
        import gevent
        import gevent.event
        import gevent.lock
        import gevent.monkey
        import gevent.queue

        self._gevent = gevent
        self._task_greenlet = _task_greenlet_class()
        self._event_cls = gevent.event.Event
        self._lock_cls = gevent.lock.RLock
        self._semaphore_cls = gevent.lock.BoundedSemaphore
        self._queue_cls = gevent.queue.Queue
        self._native_lock_factory = gevent.monkey.get_original("_thread", "allocate_lock")

    def spawn(self, name: str, target: Callable[[], None]) -> GreenletHandle:
        greenlet = self._gevent.spawn(target)
        greenlet.name = name
        return GreenletHandle(greenlet, name)

    def spawn_task(self, name: str, target: Callable[[], None]) -> GreenletHandle:
        """A new greenlet per task (greenlets are cheap, so there is nothing to reuse), made without
        gevent's spawning stack (see :func:`_task_greenlet_class`)."""
        greenlet = self._task_greenlet.spawn(target)
        greenlet.name = name
        return GreenletHandle(greenlet, name)

    def close_idle(self) -> None:
        """Nothing is parked: finished greenlets are gone."""

    def sleep(self, seconds: float) -> None:
        self._gevent.sleep(max(0.0, seconds))

    def event(self) -> Any:
        return self._event_cls()

    def lock(self) -> Any:
        return self._lock_cls()

    def semaphore(self, value: int) -> Any:
        return self._semaphore_cls(value)

    def queue(self, maxsize: int = 0) -> Any:
        return self._queue_cls(maxsize or None)

    #: the clock itself: read several times per task (a wrapper would be a Python frame each time)
    monotonic = staticmethod(time.monotonic)

    def local(self) -> Any:
        """Per greenlet (and per OS thread), in a context variable: see :mod:`.context_local`."""
        return ContextLocal()

    def native_lock(self) -> Any:
        # The original OS lock: status() must be readable from a real thread while the hub is stuck.
        return self._native_lock_factory()

    def kill(self, handle: Any) -> bool:
        """Kill a greenlet at its next cooperative point; False for a handle this backend did not make."""
        if isinstance(handle, GreenletHandle):
            handle.kill(block=False)
            return True
        return False

    def scheduler_monitor(self) -> HubMonitor:
        return HubMonitor(interval=hub_monitor_interval())


class HubMonitor:
    """Detects a blocked gevent hub, readable from any real OS thread.

    A repeating timer of the hub's own loop stamps the time every ``interval`` seconds: its
    callback runs in the hub itself (no greenlet, no switch), so it runs only while the hub runs.
    A probe on another OS thread (or the status snapshot) compares that stamp with the clock: a
    stamp older than ``interval`` is *overdue*, and the overdue time is how long the hub has at
    least been blocked. Nothing else wakes up: an idle gevent worker pays one loop wakeup per
    ``interval`` for this (default 5 s), and a worker's supervisor does not add its own (the
    stamp calls ``on_tick``, the worker's progress tick; ``bench/idle_cpu.py`` counts the
    wake-ups). A block is never over-reported, and a block longer than a threshold
    (``event_loop_stall_seconds``, 30 s) is seen at most ``interval`` after it passed the threshold.
    """

    def __init__(self, *, interval: float = 5.0) -> None:
        self.interval = interval
        self._last_tick = time.monotonic()
        self._stopped = False
        self._timer: Any = None
        self._hub_thread: Optional[int] = None
        self._on_tick: Optional[Callable[[float], None]] = None
        self._worst = 0.0
        # (when it ended, how long it lasted) of the last block longer than _REPORTED_BLOCK_SECONDS
        self._last_block: Optional[Tuple[float, float]] = None

    def start(self, on_tick: Optional[Callable[[float], None]] = None) -> None:
        """Start stamping on this thread's hub; ``on_tick(interval)`` is called with every stamp."""
        import gevent

        self._stop_timer()
        hub = gevent.get_hub()
        self._stopped = False
        self._on_tick = on_tick
        self._hub_thread = hub.thread_ident
        self._last_tick = time.monotonic()
        # ref=False: the stamp never keeps the loop (or a process waiting for it) alive by itself.
        timer = hub.loop.timer(self.interval, self.interval, ref=False)
        timer.start(self._tick)
        self._timer = timer

    def _tick(self) -> None:
        if self._stopped:  # stopped from another OS thread: the loop's own thread ends the timer
            self._stop_timer()
            return
        now = time.monotonic()
        blocked = now - self._last_tick - self.interval
        if blocked > _REPORTED_BLOCK_SECONDS:
            self._last_block = (now, blocked)
        self._worst = max(self._worst, blocked)
        self._last_tick = now
        on_tick = self._on_tick
        if on_tick is not None:
            try:
                on_tick(self.interval)
            except Exception:  # the stamp must never stop: it is how a blocked hub is seen
                logger.exception("hub monitor tick callback failed")

    def stop(self) -> None:
        """Stop stamping (from any thread: another OS thread's stop takes effect at the next stamp)."""
        self._stopped = True
        if self._hub_thread is not None and _os_thread_ident() == self._hub_thread:
            self._stop_timer()

    def _stop_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.stop()

    def describe_stall(self, seconds: float) -> str:
        return f"hub_blocked: the gevent hub has been blocked for {seconds:.1f} s"

    def recent_block_seconds(self, within: float) -> Optional[float]:
        """How long the hub was blocked, when that block ended less than ``within`` seconds ago."""
        block = self._last_block
        if block is None or time.monotonic() - block[0] > within:
            return None
        return block[1]

    @property
    def worst_blocked_seconds(self) -> float:
        """The longest the hub was seen blocked (an ongoing block included)."""
        return max(self._worst, self.overdue())

    def tick_age(self) -> float:
        """Seconds since the hub last ran the monitor's stamp (readable from any thread)."""
        return time.monotonic() - self._last_tick

    def overdue(self) -> float:
        """How long the monitor's stamp is late: the hub has been blocked at least this long."""
        return max(0.0, self.tick_age() - self.interval)

    def blocked_seconds(self, threshold: float) -> Optional[float]:
        """How long the hub has been blocked, when longer than ``threshold``; else ``None``."""
        late = self.overdue()
        return late if late > threshold else None


def _os_thread_ident() -> int:
    """The real OS thread's ident (``threading.get_ident`` is a greenlet's once patched)."""
    get_ident = _monkey().get_original("_thread", "get_ident")
    return int(get_ident())


#: Environment variable: how often the hub monitor samples, in seconds (default 5). Lower it when
#: ``status(event_loop_stall_seconds=...)`` is given a threshold of a few seconds.
HUB_MONITOR_ENV = "SYNC_WORKER_HUB_MONITOR_SECONDS"


def hub_monitor_interval() -> float:
    """The hub monitor's interval: ``SYNC_WORKER_HUB_MONITOR_SECONDS`` when set (0.01-60), else 5 s."""
    raw = os.environ.get(HUB_MONITOR_ENV)
    if not raw:
        return 5.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{HUB_MONITOR_ENV} must be a number of seconds, not {raw!r}") from None
    if not 0.01 <= value <= 60.0:
        raise ValueError(f"{HUB_MONITOR_ENV} must be between 0.01 and 60 seconds, not {raw!r}")
    return value


#: A hub late by more than this counts as blocked (shorter gaps are timer jitter and busy loops).
_REPORTED_BLOCK_SECONDS = 0.25


def is_patched() -> bool:
    """Whether this process was monkey-patched for gevent (socket at least)."""
    if "gevent" not in sys.modules:
        return False
    try:
        return bool(_monkey().is_module_patched("socket"))
    except GeventNotPatched:  # pragma: no cover
        return False
