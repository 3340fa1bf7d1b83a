"""What one prefork child runs: the split of the loaded worker, the recycler, the pool option."""

from __future__ import annotations

from typing import Any, List, Optional

import pytest

from sync_worker import activity, workflow
from sync_worker.host import WorkerOptions
from sync_worker.host.prefork import ACTIVITIES, WORKFLOWS, ChildSpec, Recycler, split_worker
from sync_worker.interceptors import ActivityInterceptorContext, PassthroughWorkerInterceptor
from sync_worker.worker import Worker


@activity.defn(name="roles.work")
def work() -> str:
    return "done"


@workflow.defn(name="roles.flow")
class Flow:
    def run(self, ctx: Any) -> Any:
        result = yield ctx.schedule_activity("roles.work", [])
        return result


class FakeClient:
    base_url = "http://127.0.0.1:1"
    namespace = "default"

    def __init__(self) -> None:
        self.clones: List[FakeClient] = []

    def clone(self) -> FakeClient:
        twin = FakeClient()
        self.clones.append(twin)
        return twin


def _context() -> ActivityInterceptorContext:
    return ActivityInterceptorContext(worker_id="w", task_queue="q", task={}, activity_type="roles.work", args=())


def test_the_child_tag_names_role_index_and_generation() -> None:
    assert ChildSpec(ACTIVITIES, 1, 0).tag == "a1.0"
    assert ChildSpec(WORKFLOWS, 0, 3).tag == "w0.3"


def test_an_activities_child_serves_activities_alone_with_one_slot_its_own_client_and_the_recycler() -> None:
    client = FakeClient()
    marker = PassthroughWorkerInterceptor()
    loaded = Worker(client, task_queue="q", activities=[work], workflows=[Flow], worker_id="base",  # type: ignore[arg-type]
                    max_concurrent_activity_tasks=8, shutdown_timeout=7, interceptors=[marker],
                    sticky_cache_capacity=5, pool="threads")
    recycler = Recycler(max_tasks=3)
    child = split_worker(loaded, ChildSpec(ACTIVITIES, 1, 2), recycler=recycler)
    assert child.worker_id == "base-a1.2"
    assert child.client is client.clones[0]
    assert list(child.activities) == ["roles.work"] and not child.workflows
    assert child.max_concurrent_activity_tasks == 1 and child.max_concurrent_activity_task_polls == 1
    assert child.shutdown_timeout == 7 and child.pool == "threads"
    assert child.interceptors[0] is recycler and marker in child.interceptors

    flows = split_worker(loaded, ChildSpec(WORKFLOWS, 0, 0), recycler=recycler)
    assert flows.worker_id == "base-w0.0"
    assert not flows.activities and flows.workflows.names() == ["roles.flow"]
    assert recycler not in flows.interceptors
    assert flows.sticky_cache.capacity == 5


def test_the_recycler_asks_once_after_the_nth_task() -> None:
    reasons: List[str] = []
    recycler = Recycler(max_tasks=2)
    recycler.on_recycle = reasons.append
    assert recycler.execute_activity(_context(), lambda ctx: "one") == "one"
    assert reasons == []
    with pytest.raises(ValueError):
        recycler.execute_activity(_context(), _raise)  # a failed attempt counts too
    assert reasons == ["max-tasks-per-child reached (2 task(s))"]
    recycler.execute_activity(_context(), lambda ctx: "three")
    assert len(reasons) == 1 and recycler.finished == 3


def _raise(context: ActivityInterceptorContext) -> Any:
    raise ValueError("boom")


def test_the_recycler_reads_memory_after_each_task() -> None:
    readings: List[Optional[int]] = [10 * 1024, 300 * 1024]
    reasons: List[str] = []
    recycler = Recycler(max_memory_bytes=200 * 1024, memory=lambda: readings.pop(0))
    recycler.on_recycle = reasons.append
    recycler.execute_activity(_context(), lambda ctx: None)
    assert reasons == []
    recycler.execute_activity(_context(), lambda ctx: None)
    assert reasons == ["max-memory-per-child exceeded (300 KiB > 200 KiB)"]


def test_pool_prefork_is_an_option_whose_workers_run_on_threads() -> None:
    options = WorkerOptions.from_mapping({"POOL": "prefork", "TASK_QUEUE": "q"})
    assert options.pool == "prefork" and options.prefork
    assert options.worker_kwargs()["pool"] == "threads"
    assert WorkerOptions.from_env({"SYNC_WORKER_POOL": "processes"}).pool == "prefork"


def test_a_recycling_child_marks_its_runtime_stopping_before_it_stops_intake() -> None:
    """The recycle stops intake from the slot thread; the pollers then end. The runtime is marked as
    stopping first, so its supervisor never takes a poller that ended for that reason for a crash
    ("the activity poller exited", exit 1 instead of a recycle: seen under load in the prefork e2e).
    Every member of a group stops its intake through its shell's one operation."""
    import time
    from types import SimpleNamespace

    from sync_worker.host.prefork.child import _stop_intake
    from sync_worker.runtime.backend import ThreadBackend
    from sync_worker.runtime.shell import RuntimeShell
    from sync_worker.runtime.status import StatusBoard

    calls: List[str] = []
    members = []
    for name in ("a", "b"):
        shell = RuntimeShell(label="worker", runtime_id=name, backend=ThreadBackend(),
                             board=StatusBoard(name, "default", "q", time.monotonic), shutdown_timeout=1.0)

        def stop_intake(shell: RuntimeShell = shell, name: str = name) -> None:
            calls.append(f"{name}: stop_intake, stop marked={shell.stop_requested.is_set()}")

        shell.attach(SimpleNamespace(stop_intake=stop_intake))  # type: ignore[arg-type]
        members.append(SimpleNamespace(shell=shell))
    _stop_intake(SimpleNamespace(runtimes=members))
    assert calls == ["a: stop_intake, stop marked=True", "b: stop_intake, stop marked=True"]
    assert not members[0].shell.run_started  # intake only: the stop itself comes later, on its own thread
