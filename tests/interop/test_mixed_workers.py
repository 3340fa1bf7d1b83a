"""sync_worker and the published SDK (``durable_workflow`` 2.12.0) on the same dev server:

* a run started by the published ``Client`` completes on sync_worker's ``Worker`` (queried and
  signalled through the published client), and a run started by our ``Client`` completes on the
  published SDK's ``Worker``;
* one task queue served by both workers: ours for workflows and theirs for activities, and the reverse.

The workflows are the SDK-authored ``interop.swap.*`` module (``_sdk_authored_workflows.py``): as it is
for the SDK worker, import-swapped for ours (see ``test_import_swap.py``).
"""

from __future__ import annotations

import asyncio
import types
import uuid
from typing import Any, Dict, Iterator, List, Optional

import pytest
from durable_workflow import Client as SdkClient
from durable_workflow import Worker as SdkWorker

from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.worker import InMemoryMetrics, Worker
from tests._import_swap import load_with_sync_worker_imports
from tests.e2e._worker_support import RunningWorker, wait_for
from tests.interop import _sdk_authored_workflows as sdk_module
from tests.interop._sdk import run, with_worker
from tests.interop.test_import_swap import SWAPPED_NAME, load_swapped_module

EXPECTED_ORDER = {"greeting": "hello ada", "marker": "marker-21", "version": 2, "approved": True,
                  "approved_by": "grace", "doubles": [2, 4, 42], "child": {"child_of": 21, "doubled": 42}}


@pytest.fixture(scope="module")
def ours() -> Iterator[types.ModuleType]:
    import sys

    module = load_swapped_module()
    try:
        yield module
    finally:
        sys.modules.pop(SWAPPED_NAME, None)


@pytest.fixture
def client(dev_server: DevServer) -> Iterator[Client]:
    c = Client(dev_server.url)
    try:
        yield c
    finally:
        c.close()


def _types(events: List[Dict[str, Any]]) -> List[str]:
    return [str(e["event_type"]) for e in events]


def _our_worker(client: Client, queue: str, *, workflows: Any = (), activities: Any = (),
                metrics: Optional[InMemoryMetrics] = None) -> Worker:
    return Worker(client, task_queue=queue, workflows=list(workflows), activities=list(activities),
                  poll_timeout=2.0, shutdown_timeout=10.0, metrics=metrics)


def _history(client: Client, workflow_id: str) -> List[Dict[str, Any]]:
    return list(client.iter_history(workflow_id, client.describe_workflow(workflow_id).run_id or ""))


async def _sdk_drive_order(sdk: SdkClient, queue: str) -> Any:
    """Start an order with the published client, wait for its approval wait, query, signal, result."""
    handle = await sdk.start_workflow(workflow_type="interop.swap.order", task_queue=queue,
                                      workflow_id=f"mixed-order-{uuid.uuid4().hex[:8]}", input=["ada", 21])
    for _ in range(400):
        answer = await sdk.query_workflow(handle.workflow_id, sdk_module.STAGE_QUERY)
        if answer["result"]["stage"] == "awaiting-approval":
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"order never reached its approval wait: {answer}")
    await sdk.signal_workflow(handle.workflow_id, sdk_module.APPROVE_SIGNAL, args=["grace"])
    return handle.workflow_id, await sdk.get_result(handle, timeout=30)


def _our_drive_order(client: Client, queue: str) -> Any:
    handle = client.start_workflow("interop.swap.order", "ada", 21, task_queue=queue,
                                   workflow_id=f"mixed-order-{uuid.uuid4().hex[:8]}")
    wait_for(lambda: client.query_workflow(handle.workflow_id, sdk_module.STAGE_QUERY)["result"]["stage"]
             == "awaiting-approval", timeout=20)
    handle.signal(sdk_module.APPROVE_SIGNAL, ["grace"])
    return handle.workflow_id, handle.result(timeout=30, poll_interval=0.1)


def test_run_started_by_the_published_client_completes_on_our_worker(
        dev_server: DevServer, client: Client, ours: types.ModuleType) -> None:
    queue = f"mixed-a-{uuid.uuid4().hex[:8]}"
    metrics = InMemoryMetrics()
    worker = _our_worker(client, queue, workflows=ours.WORKFLOWS, activities=ours.ACTIVITIES, metrics=metrics)

    async def drive() -> Any:
        sdk = SdkClient(dev_server.url)
        try:
            workflow_id, result = await _sdk_drive_order(sdk, queue)
            countdown = await sdk.start_workflow(workflow_type="interop.swap.countdown", task_queue=queue,
                                                 workflow_id=f"mixed-cd-{uuid.uuid4().hex[:8]}", input=[2, []])
            final = await sdk.get_result(sdk.get_workflow_handle(countdown.workflow_id), timeout=30)
            return workflow_id, result, final
        finally:
            await sdk.aclose()

    with RunningWorker(worker) as running:
        workflow_id, result, countdown = run(drive())
        assert running.stop() is None
    assert result == EXPECTED_ORDER
    assert countdown == {"collected": [4, 2], "big": 9007199254740993}
    assert metrics.counter("durable_workflow_worker_tasks", task_kind="workflow", outcome="completed") >= 6
    assert metrics.counter("durable_workflow_worker_tasks", task_kind="activity", outcome="completed") == 4 + 2 + 1
    started = [e["payload"] for e in _history(client, workflow_id) if e["event_type"] == "ActivityStarted"]
    assert started and all(p["lease_owner"] == worker.worker_id for p in started)


def test_run_started_by_our_client_completes_on_the_sdk_worker(dev_server: DevServer, client: Client) -> None:
    queue = f"mixed-b-{uuid.uuid4().hex[:8]}"

    async def body(sdk: SdkClient, worker: SdkWorker) -> Any:
        workflow_id, result = await asyncio.to_thread(_our_drive_order, client, queue)
        countdown = await asyncio.to_thread(client.start_workflow, "interop.swap.countdown", 2, [],
                                            task_queue=queue)
        final = await asyncio.to_thread(lambda: countdown.result(timeout=30))
        return workflow_id, result, (countdown.workflow_id, final), worker.worker_id

    workflow_id, result, (countdown_id, countdown), sdk_worker_id = run(
        with_worker(dev_server.url, queue, body, workflows=sdk_module.WORKFLOWS, activities=sdk_module.ACTIVITIES))
    assert result == EXPECTED_ORDER
    assert countdown == {"collected": [4, 2], "big": 9007199254740993}
    assert len(client.list_runs(countdown_id)) == 2  # continue-as-new, followed by our handle
    started = [e["payload"] for e in _history(client, workflow_id) if e["event_type"] == "ActivityStarted"]
    assert started and all(p["lease_owner"] == sdk_worker_id for p in started)


@pytest.mark.parametrize("split", ["our-workflows+sdk-activities", "sdk-workflows+our-activities"])
def test_one_task_queue_served_by_both_workers(split: str, dev_server: DevServer, client: Client,
                                              ours: types.ModuleType) -> None:
    queue = f"mixed-c-{uuid.uuid4().hex[:8]}"
    metrics = InMemoryMetrics()
    our_workflows = split.startswith("our-workflows")
    if our_workflows:
        worker = _our_worker(client, queue, workflows=ours.WORKFLOWS, metrics=metrics)
        sdk_kwargs: Dict[str, Any] = {"activities": sdk_module.ACTIVITIES}
    else:
        worker = _our_worker(client, queue, activities=ours.ACTIVITIES, metrics=metrics)
        sdk_kwargs = {"workflows": sdk_module.WORKFLOWS}

    async def body(sdk: SdkClient, sdk_worker: SdkWorker) -> Any:
        workflow_id, result = await _sdk_drive_order(sdk, queue)
        return workflow_id, result, sdk_worker.worker_id

    with RunningWorker(worker) as running:
        workflow_id, result, sdk_worker_id = run(with_worker(dev_server.url, queue, body, **sdk_kwargs))
        assert running.stop() is None

    assert result == EXPECTED_ORDER
    events = _history(client, workflow_id)
    assert _types(events).count("ActivityCompleted") == 4
    activity_owner = sdk_worker_id if our_workflows else worker.worker_id
    started = [e["payload"] for e in events if e["event_type"] == "ActivityStarted"]
    assert all(p["lease_owner"] == activity_owner for p in started)
    our_workflow_tasks = metrics.counter("durable_workflow_worker_tasks", task_kind="workflow", outcome="completed")
    our_activity_tasks = metrics.counter("durable_workflow_worker_tasks", task_kind="activity", outcome="completed")
    if our_workflows:
        # order (and its child) ran on our worker only; every activity on the SDK's
        assert our_workflow_tasks >= 6 and our_activity_tasks == 0
    else:
        assert our_workflow_tasks == 0 and our_activity_tasks == 4 + 1  # the child runs one activity too


def test_our_sticky_worker_and_the_sdk_worker_share_a_queue(dev_server: DevServer, client: Client,
                                                              ours: types.ModuleType) -> None:
    """Both serve workflows and activities on one queue, ours with the sticky cache: runs hop
    between them, so our cached states meet histories the other worker extended, and tasks the
    dev server routes as sticky hits to us alternate with full histories for the SDK worker.

    (The order workflow is left out: its condition-wait predicate fingerprints differ between the
    SDK-authored module and the import-swapped one, so the two workers cannot share its runs with
    or without the cache.)"""
    queue = f"mixed-sticky-{uuid.uuid4().hex[:8]}"
    worker = Worker(client, task_queue=queue, workflows=list(ours.WORKFLOWS), activities=list(ours.ACTIVITIES),
                    poll_timeout=2.0, shutdown_timeout=10.0, sticky_cache_capacity=32)

    async def start_and_wait(sdk: SdkClient, kind: str, args: List[Any]) -> Any:
        handle = await sdk.start_workflow(workflow_type=kind, task_queue=queue,
                                          workflow_id=f"mixed-sticky-{uuid.uuid4().hex[:8]}", input=args)
        return await sdk.get_result(sdk.get_workflow_handle(handle.workflow_id), timeout=60)

    async def body(sdk: SdkClient, sdk_worker: SdkWorker) -> Any:
        runs = [start_and_wait(sdk, "interop.swap.countdown", [4, []]) for _ in range(4)]
        runs += [start_and_wait(sdk, "interop.swap.child", [value]) for value in range(6)]
        return await asyncio.gather(*runs)

    with RunningWorker(worker) as running:
        results = run(with_worker(dev_server.url, queue, body, workflows=sdk_module.WORKFLOWS,
                                  activities=sdk_module.ACTIVITIES))
        metrics = worker.sticky_cache_metrics()
        assert running.stop() is None
    assert results[:4] == [{"collected": [8, 6, 4, 2], "big": 9007199254740993}] * 4
    assert results[4:] == [{"child_of": value, "doubled": value * 2} for value in range(6)]
    assert metrics["hit"] + metrics["miss"] >= 1, metrics


def test_signal_driven_runs_hop_between_both_workers_and_replay_on_both(dev_server: DevServer,
                                                                         client: Client) -> None:
    """One module deployed with either import (so one module name and the same condition
    fingerprints), both workers serving workflows and activities on one queue, ours with the
    sticky cache: every order waits for its approval signal, its tasks land on either worker, and
    each worker replays what the other recorded (signals sent once the wait is open: no race)."""
    import sys

    same = load_with_sync_worker_imports(sdk_module, same_name=True)
    queue = f"mixed-signals-{uuid.uuid4().hex[:8]}"
    metrics = InMemoryMetrics()
    worker = Worker(client, task_queue=queue, workflows=list(same.WORKFLOWS), activities=list(same.ACTIVITIES),
                    poll_timeout=2.0, shutdown_timeout=10.0, sticky_cache_capacity=32, metrics=metrics)

    async def body(sdk: SdkClient, sdk_worker: SdkWorker) -> Any:
        return await asyncio.gather(*[asyncio.to_thread(_our_drive_order, client, queue) for _ in range(4)])

    try:
        with RunningWorker(worker) as running:
            outcomes = run(with_worker(dev_server.url, queue, body, workflows=sdk_module.WORKFLOWS,
                                       activities=sdk_module.ACTIVITIES))
            assert running.stop() is None
    finally:
        sys.modules.pop(SWAPPED_NAME, None)
    assert [result for _, result in outcomes] == [EXPECTED_ORDER] * 4
    # both workers completed workflow tasks of these runs (the dev server keeps each task's last lease owner)
    with dev_server.engine.lock:
        owners = {task["lease_owner"] for task in dev_server.engine.store.select("wf_tasks", "task_queue = ?",
                                                                                 (queue,))}
    assert worker.worker_id in owners and len(owners - {worker.worker_id, None}) >= 1, owners
    assert metrics.counter("durable_workflow_worker_tasks", task_kind="workflow", outcome="completed") > 0
