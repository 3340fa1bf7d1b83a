"""The sticky workflow cache (protocol §4.7): a run's replayed state kept between its tasks.

The cache is on by default (:data:`DEFAULT_STICKY_CACHE_CAPACITY` runs, 16 MiB of history), so
long workflows cost the same per step out of the box; ``sticky_cache_capacity=0`` turns it off.
Left at its default it also turns itself off, with one INFO line, against a server that does not
advertise sticky execution (an explicit capacity there is a start-up error), and it sheds its
older half whenever the activity admission gate defers work for memory (the gate's reading).
A workflow task that leaves its run blocked on an
activity, timer, child, condition wait (message-stream receives included) or parallel group
keeps the suspended replay (``sync_worker.workflow.incremental``)
in a bounded LRU keyed by run id, together with the event sequence it consumed. The next
task of that run feeds only the events after that sequence into the state and continues
the workflow from where it stopped, so each step costs the same however long the run is.

Continuity is proved on every task, and anything unproved replays cold:

* the task's history must continue exactly after the cached sequence: either a tail whose
  first event is ``last + 1`` (the server's sticky hit, ``sticky_replay_mode:
  "sticky_hit_expected"``) or the full history whose event at the cached position is the
  very event the cache consumed last; event sequences must be contiguous;
* same workflow class, same cancellation flag, and the replayer's own checks (the commands
  the last task sent are the next recorded results, every condition-wait decision, receiver
  binding and parallel-group order the code already used reads the same from the longer
  history -- see ``incremental``);
* update tasks and queries never touch a cached instance (they replay cold);
* a failed task, a failed completion, a closed run, capacity/byte/TTL pressure or worker
  shutdown drop the entry.

A cold replay needs the complete history: when the task carries only a tail (a sticky hit
for a run this worker no longer has: restart, eviction, another worker), it is fetched
through the history route from the first page (token ``"MA=="``, offset 0).

Bytes are the encoded size of the history a state holds (the instance itself is not
measured). Metrics (:meth:`StickyWorkflowCache.metrics`): ``hit``, ``miss``, ``eviction``,
``forced_cold_replay``, ``entries``, ``history_bytes`` -- the published SDK's names.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..workflow.incremental import SuspendedRun
from ..workflow.task import resume_workflow_task, start_workflow_task
from .registration import SDK_VERSION

__all__ = ["DEFAULT_STICKY_CACHE_CAPACITY", "CachedRun", "StickyWorkflowCache", "check_sticky_support",
           "run_sticky_task"]

logger = logging.getLogger("sync_worker.worker.sticky")

#: Runs kept when ``sticky_cache_capacity`` is not given (bounded by ``sticky_cache_max_bytes`` too).
DEFAULT_STICKY_CACHE_CAPACITY = 500

#: The opaque history page token of offset 0 (the published SDK's cold-path token).
FIRST_PAGE_TOKEN = "MA=="


@dataclass
class CachedRun:
    state: SuspendedRun
    workflow_id: str
    run_id: str
    count: int
    last_sequence: int
    last_event: Dict[str, Any]
    size: int
    expires_at: float = 0.0


#: ``json.dumps(..., separators=(",", ":"), default=str)`` without building an encoder per call
_SIZE_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)
#: CPython's C encoder of that text, built once (``JSONEncoder.encode`` builds one per call); without
#: the circular-reference check: decoded JSON is a tree (a cycle ends in ``RecursionError``, caught)
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)  # (CPython's; not in the typeshed stubs)
_C_SIZE_ENCODER = (None if _c_make_encoder is None else _c_make_encoder(
    None, str, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True))


def _encoded_size(events: List[Dict[str, Any]]) -> int:
    try:
        if _C_SIZE_ENCODER is not None:
            return len("".join(_C_SIZE_ENCODER(events, 0)))
        return len(_SIZE_ENCODER.encode(events))
    except (TypeError, ValueError, RecursionError):
        return 512 * len(events)


def _sequence(event: Mapping[str, Any]) -> Optional[int]:
    value = event.get("sequence")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class StickyWorkflowCache:
    """A bounded LRU (entries, bytes, TTL) of suspended runs; thread- and greenlet-safe."""

    def __init__(self, capacity: Optional[int] = 0, max_bytes: int = 16 * 1024 * 1024, ttl_seconds: int = 300, *,
                 clock: Callable[[], float] = time.monotonic, lock: Any = None,
                 pressure: Optional[Callable[[], bool]] = None) -> None:
        #: Whether the capacity was chosen (None: the default, which a server without sticky support turns off).
        self.explicit = capacity is not None
        capacity = DEFAULT_STICKY_CACHE_CAPACITY if capacity is None else capacity
        for name, value, minimum in (("capacity", capacity, 0), ("max_bytes", max_bytes, 1),
                                     ("ttl_seconds", ttl_seconds, 1)):
            if type(value) is not int or value < minimum:
                raise ValueError(f"sticky_cache_{name} must be an integer of at least {minimum}")
        if ttl_seconds > 3600:
            raise ValueError("sticky_cache_ttl_seconds must be at most 3600")
        self.capacity, self.max_bytes, self.ttl_seconds = capacity, max_bytes, ttl_seconds
        self._clock = clock
        self._lock = lock if lock is not None else threading.Lock()
        self._entries: OrderedDict[str, CachedRun] = OrderedDict()
        self._bytes = 0
        self._metrics = {"hit": 0, "miss": 0, "eviction": 0, "forced_cold_replay": 0}
        #: Memory pressure (the activity admission gate deferring for memory): shed the older half.
        self._pressure = pressure
        self.pressure_evictions = 0

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    def disable(self) -> None:
        """Turn the cache off (a server that does not support sticky execution) and empty it."""
        with self._lock:
            self.capacity = 0
            self._entries.clear()
            self._bytes = 0

    def _shed_for_memory(self) -> None:
        """Under memory pressure drop the least recently used half (lock held)."""
        pressure = self._pressure
        if pressure is None or not self._entries or not pressure():
            return
        for _ in range((len(self._entries) + 1) // 2):
            self._drop(next(iter(self._entries)))
            self._metrics["eviction"] += 1
            self.pressure_evictions += 1

    def _drop(self, run_id: str) -> Optional[CachedRun]:
        entry = self._entries.pop(run_id, None)
        if entry is not None:
            self._bytes -= entry.size
        return entry

    def _expire(self) -> None:
        # Entries sit in the order they were kept, each expiring ``ttl_seconds`` after that, so the
        # expired ones are a prefix: stop at the first live one (this runs on every take and keep).
        now = self._clock()
        entries = self._entries
        while entries:
            run_id, entry = next(iter(entries.items()))
            if entry.expires_at > now:
                return
            self._drop(run_id)
            self._metrics["eviction"] += 1

    def take(self, run_id: str) -> Optional[CachedRun]:
        """Remove and return the run's entry (the task owns it until it is kept again)."""
        with self._lock:
            self._expire()
            return self._drop(run_id)

    def discard(self, run_id: str) -> None:
        with self._lock:
            self._drop(run_id)

    def keep(self, entry: CachedRun) -> bool:
        """Cache ``entry`` (least recently used ones make room); False if it can never fit."""
        with self._lock:
            self._drop(entry.run_id)
            self._expire()
            if not self.enabled or entry.size > self.max_bytes:
                return False
            self._shed_for_memory()
            while self._entries and (len(self._entries) >= self.capacity
                                     or self._bytes + entry.size > self.max_bytes):
                self._drop(next(iter(self._entries)))
                self._metrics["eviction"] += 1
            entry.expires_at = self._clock() + self.ttl_seconds
            self._entries[entry.run_id] = entry
            self._bytes += entry.size
            return True

    def record(self, *, hit: bool, forced: bool = False) -> None:
        with self._lock:
            self._metrics["hit" if hit else "miss"] += 1
            if forced:
                self._metrics["forced_cold_replay"] += 1

    def metrics(self) -> Dict[str, int]:
        with self._lock:
            self._expire()
            return {**self._metrics, "entries": len(self._entries), "history_bytes": self._bytes}

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def claim(self, entry: CachedRun, worker_id: str, build_id: Optional[str]) -> Dict[str, Any]:
        """The completion's ``sticky_cache`` object (§4.5) for a kept entry."""
        with self._lock:
            self._expire()
            metrics = dict(self._metrics)
        return {"worker_id": worker_id, "workflow_id": entry.workflow_id, "run_id": entry.run_id,
                # The real server requires a non-empty build id here (the SDK sends its version).
                "build_id": (build_id or "").strip() or SDK_VERSION, "ttl_seconds": self.ttl_seconds,
                "last_history_sequence": entry.last_sequence,
                "metrics": {name: metrics[name] for name in ("hit", "miss", "eviction", "forced_cold_replay")}}


def check_sticky_support(cache: StickyWorkflowCache, server_capabilities: Mapping[str, Any]) -> None:
    """Refuse to start a sticky worker on a server that does not advertise sticky execution (§1)."""
    support = server_capabilities.get("sticky_execution") if isinstance(server_capabilities, Mapping) else None
    if cache.enabled and (not isinstance(support, Mapping) or support.get("supported") is not True):
        if not cache.explicit:
            cache.disable()
            logger.info("sticky workflow cache off: the server does not advertise sticky execution "
                        "(server_capabilities.sticky_execution.supported); every workflow task replays cold")
            return
        raise RuntimeError("sticky execution requires Server's advertised sticky_execution support "
                           "(server_capabilities.sticky_execution.supported); set sticky_cache_capacity=0")


def _contiguous(events: List[Dict[str, Any]], first: int) -> bool:
    return all(_sequence(event) == first + offset for offset, event in enumerate(events))


def _complete(events: List[Dict[str, Any]]) -> bool:
    """Whether ``events`` start at the beginning of the run (sequence 1, or no sequences at all)."""
    if not events:
        return False
    first = _sequence(events[0])
    return first == 1 or (first is None and all(_sequence(event) is None for event in events))


def _new_events(entry: CachedRun, events: List[Dict[str, Any]]) -> Optional[List[Dict[str, Any]]]:
    """The events after the cached state, when ``events`` provably continue it; else None.

    ``events`` may be a tail (a sticky hit), a tail that repeats what the state already has
    (a hit after a waiting-for-history task), or the full history; where they overlap the
    cached state, the event at its last position must be the very event it consumed last.
    """
    if not events:
        return None
    first = _sequence(events[0])
    if first is not None:
        if entry.count != entry.last_sequence or not 1 <= first <= entry.last_sequence + 1:
            return None
        skip = entry.last_sequence + 1 - first
        if skip and (len(events) < skip or events[skip - 1] != entry.last_event):
            return None
        tail = events[skip:]
        return tail if tail and _contiguous(tail, entry.last_sequence + 1) else None
    if _complete(events) and len(events) > entry.count and events[entry.count - 1] == entry.last_event:
        return events[entry.count:]
    return None


def _entry(state: SuspendedRun, task: Mapping[str, Any], events: List[Dict[str, Any]], size: int) -> CachedRun:
    last = events[-1]
    sequence = _sequence(last)
    return CachedRun(state=state, workflow_id=str(task.get("workflow_id") or ""), run_id=str(task.get("run_id")),
                     count=len(events), last_sequence=sequence if sequence is not None else len(events),
                     last_event=last, size=size)


def run_sticky_task(
    cache: StickyWorkflowCache, registry: Any, task: Dict[str, Any], *, task_queue: str,
    load: Callable[[Optional[str]], List[Dict[str, Any]]], local_activities: Any = None,
) -> Tuple[Any, Optional[CachedRun]]:
    """Run one workflow task through the cache; returns ``(outcome, entry to keep or None)``.

    ``load(None)`` returns the task's own history (its inline page plus further pages),
    ``load(FIRST_PAGE_TOKEN)`` the complete history through the history route.
    """
    run_id = task.get("run_id")
    mode = task.get("sticky_replay_mode")
    update = isinstance(task.get("workflow_update_id"), str) and bool(task.get("workflow_update_id"))
    entry = cache.take(run_id) if isinstance(run_id, str) and run_id and not update else None
    events = load(None)
    if entry is not None:
        new = _new_events(entry, events)
        resumed = None if new is None else resume_workflow_task(registry, task, entry.state, new,
                                                                task_queue=task_queue,
                                                                local_activities=local_activities)
        if resumed is not None:
            cache.record(hit=True)
            outcome, state = resumed
            assert new is not None
            if state is None:
                return outcome, None
            entry.state = state
            entry.count += len(new)
            entry.last_event = new[-1]
            entry.last_sequence = _sequence(new[-1]) or entry.count
            entry.size += _encoded_size(new)
            return outcome, entry
        logger.debug("sticky cache: run %s cannot be resumed; replaying cold", run_id)
        cache.record(hit=False, forced=True)
    elif not update:
        cache.record(hit=False, forced=mode in ("sticky_hit_expected", "forced_cold_replay"))
    if not _complete(events):
        events = load(FIRST_PAGE_TOKEN)
    outcome, state = start_workflow_task(registry, task, events, task_queue=task_queue,
                                         local_activities=local_activities)
    if state is None or not events or not isinstance(run_id, str) or not run_id:
        return outcome, None
    return outcome, _entry(state, task, events, _encoded_size(events))
