"""The sticky cache's bookkeeping (bounds, TTL, continuity proofs) and its start-up checks."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from sync_worker import payloads, workflow
from sync_worker.worker import Worker
from sync_worker.worker.sticky import (
    DEFAULT_STICKY_CACHE_CAPACITY,
    FIRST_PAGE_TOKEN,
    StickyWorkflowCache,
    check_sticky_support,
    run_sticky_task,
)
from sync_worker.workflow import WorkflowRegistry


@workflow.defn(name="unit.sticky.steps")
class Steps:
    def run(self, ctx: Any, count: int) -> Any:
        total = 0
        for step in range(count):
            total = yield ctx.schedule_activity("add", [total, step])
        return total


REGISTRY = WorkflowRegistry([Steps])


def _event(position: int, kind: str, **payload: Any) -> Dict[str, Any]:
    return {"id": f"e{position}", "sequence": position, "event_type": kind,
            "recorded_at": "2026-01-01T00:00:00Z", "payload": payload}


def _history(steps: int) -> List[Dict[str, Any]]:
    events = [_event(1, "WorkflowStarted")]
    for step in range(1, steps + 1):
        events.append(_event(len(events) + 1, "ActivityScheduled", **{"sequence": step, "activity_type": "add"}))
        events.append(_event(len(events) + 1, "ActivityCompleted", **{"sequence": step, "activity_type": "add",
                                                                      "result": payloads.envelope(step)}))
    return events


def _task(run_id: str = "run-1", **extra: Any) -> Dict[str, Any]:
    return {"task_id": "t", "workflow_type": "unit.sticky.steps", "workflow_id": "wf", "run_id": run_id,
            "payload_codec": "avro", "arguments": payloads.envelope([5]), **extra}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _run(cache: StickyWorkflowCache, task: Dict[str, Any], inline: List[Dict[str, Any]],
         full: List[Dict[str, Any]]) -> Any:
    loads: List[Any] = []

    def load(token: Any) -> List[Dict[str, Any]]:
        loads.append(token)
        return list(full) if token == FIRST_PAGE_TOKEN else list(inline)

    outcome, entry = run_sticky_task(cache, REGISTRY, task, task_queue="q", load=load)
    if entry is not None:
        cache.keep(entry)
    return outcome, loads


def test_tails_full_histories_and_overlaps_resume_and_gaps_replay_cold() -> None:
    cache = StickyWorkflowCache(4, 1 << 20, 60)
    history = _history(3)
    outcome, _ = _run(cache, _task(), history[:3], history)
    assert [c["type"] for c in outcome.commands] == ["schedule_activity"]
    outcome, loads = _run(cache, _task(sticky_replay_mode="sticky_hit_expected"), history[3:5], history)
    assert loads == [None] and cache.metrics()["hit"] == 1
    assert payloads.decode_envelope(outcome.commands[0]["arguments"]) == [2, 2]
    outcome, _ = _run(cache, _task(), history[:7], history)  # the full history again: prefix checked
    assert cache.metrics()["hit"] == 2 and payloads.decode_envelope(outcome.commands[0]["arguments"]) == [3, 3]
    gap = _history(5)
    outcome, loads = _run(cache, _task(sticky_replay_mode="sticky_hit_expected"), gap[8:], gap)
    assert loads == [None, FIRST_PAGE_TOKEN]  # a gap: the complete history is fetched and replayed cold
    assert cache.metrics()["forced_cold_replay"] == 1
    assert outcome.commands[0]["type"] == "complete_workflow"
    assert payloads.decode_envelope(outcome.commands[0]["result"]) == 5


def test_a_changed_event_in_the_overlap_forces_cold() -> None:
    cache = StickyWorkflowCache(4, 1 << 20, 60)
    history = _history(2)
    _run(cache, _task(), history[:3], history)
    forged = [dict(event) for event in history]
    forged[2] = dict(forged[2], id="other")
    _run(cache, _task(), forged, forged)
    assert cache.metrics()["forced_cold_replay"] == 1 and cache.metrics()["hit"] == 0


def test_capacity_bytes_and_ttl_bound_the_cache() -> None:
    clock = Clock()
    cache = StickyWorkflowCache(2, 1 << 20, 10, clock=clock)
    history = _history(1)
    for run in ("a", "b", "c"):
        _run(cache, _task(run), history[:1], history)
    metrics = cache.metrics()
    assert metrics["entries"] == 2 and metrics["eviction"] == 1 and metrics["history_bytes"] > 0
    clock.now += 11
    assert cache.metrics()["entries"] == 0 and cache.metrics()["eviction"] == 3
    tiny = StickyWorkflowCache(2, 50, 10)
    _run(tiny, _task(), history[:1], history)
    assert tiny.metrics()["entries"] == 0  # a state larger than the byte budget is never kept


def test_update_tasks_leave_the_cached_run_alone() -> None:
    cache = StickyWorkflowCache(4, 1 << 20, 60)
    history = _history(1)
    _run(cache, _task(), history[:1], history)
    before = cache.metrics()
    _run(cache, _task(workflow_update_id="u-1"), history[:2], history)
    assert cache.metrics()["entries"] == 1 and cache.metrics()["hit"] == before["hit"]


class NoSticky:
    base_url = "http://127.0.0.1:9"
    namespace = "default"


def test_options_are_validated_and_the_server_must_advertise_support() -> None:
    with pytest.raises(ValueError, match="sticky_cache_ttl_seconds"):
        Worker(NoSticky(), task_queue="q", workflows=[Steps], sticky_cache_ttl_seconds=0, pool="threads")
    with pytest.raises(ValueError, match="sticky_cache_capacity"):
        Worker(NoSticky(), task_queue="q", workflows=[Steps], sticky_cache_capacity=-1, pool="threads")
    cache = StickyWorkflowCache(1)
    with pytest.raises(RuntimeError, match="sticky_execution"):
        check_sticky_support(cache, {"query_tasks": True})
    check_sticky_support(cache, {"sticky_execution": {"supported": True}})
    check_sticky_support(StickyWorkflowCache(0), {})


def test_on_by_default_and_off_on_a_server_without_sticky_unless_asked(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 29: a worker left at its defaults keeps runs between tasks; against a server that
    does not advertise sticky execution that default turns itself off (one INFO line), while an
    explicit capacity there stays a start-up error."""
    assert Worker(NoSticky(), task_queue="q", workflows=[Steps], pool="threads").sticky_cache.capacity == (
        DEFAULT_STICKY_CACHE_CAPACITY)
    assert not Worker(NoSticky(), task_queue="q", workflows=[Steps], sticky_cache_capacity=0,
                      pool="threads").sticky_cache.enabled
    default = StickyWorkflowCache(None)
    assert default.enabled and not default.explicit
    with caplog.at_level("INFO", logger="sync_worker.worker.sticky"):
        check_sticky_support(default, {"query_tasks": True})
    assert not default.enabled and "sticky workflow cache off" in caplog.text
    with pytest.raises(RuntimeError, match="sticky_execution"):
        check_sticky_support(StickyWorkflowCache(DEFAULT_STICKY_CACHE_CAPACITY), {})


def test_memory_pressure_sheds_the_older_half() -> None:
    pressure = {"on": False}
    cache = StickyWorkflowCache(8, 1 << 20, 60, pressure=lambda: pressure["on"])
    history = _history(1)
    for run in ("a", "b", "c", "d"):
        _run(cache, _task(run), history[:1], history)
    assert cache.metrics()["entries"] == 4 and cache.pressure_evictions == 0
    pressure["on"] = True  # the activity admission gate defers for memory
    _run(cache, _task("e"), history[:1], history)
    assert cache.metrics()["entries"] == 3 and cache.pressure_evictions == 2  # a, b shed; e kept
    pressure["on"] = False
    _, loads = _run(cache, _task("a", sticky_replay_mode="sticky_hit_expected"), history[1:2], history)
    assert loads == [None, FIRST_PAGE_TOKEN]  # a shed run replays cold from its full history
    _, loads = _run(cache, _task("d", sticky_replay_mode="sticky_hit_expected"), history[1:3], history)
    assert loads == [None] and cache.metrics()["hit"] == 1  # a kept one resumes


def test_the_completion_claim_has_what_the_real_server_validates() -> None:
    cache = StickyWorkflowCache(4, 1 << 20, 60)
    history = _history(1)
    _, entry = run_sticky_task(cache, REGISTRY, _task(), task_queue="q", load=lambda token: history[:1])
    assert entry is not None and cache.keep(entry)
    claim = cache.claim(entry, "worker-1", None)
    # server: worker_id/workflow_id/run_id/build_id required non-empty strings, ttl 1..3600, metrics ints
    assert all(isinstance(claim[key], str) and claim[key] for key in ("worker_id", "workflow_id", "run_id", "build_id"))
    assert claim["build_id"].startswith("sync-worker-python/") and claim["ttl_seconds"] == 60
    assert cache.claim(entry, "worker-1", " b-7 ")["build_id"] == "b-7"
    assert set(claim["metrics"]) == {"hit", "miss", "eviction", "forced_cold_replay"}
    assert claim["last_history_sequence"] == 1
