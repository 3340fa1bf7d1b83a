"""Worker sessions with the published SDK (``durable_workflow`` 2.12.0) on the dev server.

One SDK-authored session workflow (``_sdk_session_workflows.py``) is run

* by two published-SDK workers on one task queue, as it is;
* by two sync_worker workers on one task queue, with only its import line swapped;
* by one worker of each kind on one task queue (ours runs the workflow, both run activities);

and every session's activities run on one worker, the results have the same shape, and the
histories the same outline. Then the SDK's ``WorkerSession`` handle and ours talk to the same
session routes.
"""

from __future__ import annotations

import asyncio
import sys
import types
import uuid
from typing import Any, Dict, Iterator, List

import pytest
from durable_workflow import Client as SdkClient
from durable_workflow import Worker as SdkWorker
from durable_workflow import WorkerSessionOptions as SdkOptions

from sync_worker import WorkerSessionOptions
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.worker import Worker
from tests._import_swap import load_with_sync_worker_imports
from tests.e2e._worker_support import RunningWorker
from tests.interop import _sdk_session_workflows as sdk_module
from tests.interop._sdk import run

RUNS = 3


@pytest.fixture(scope="module")
def ours() -> Iterator[types.ModuleType]:
    module = load_with_sync_worker_imports(sdk_module)
    try:
        yield module
    finally:
        sys.modules.pop(f"{sdk_module.__name__}__sync_worker", None)


@pytest.fixture
def client(dev_server: DevServer) -> Iterator[Client]:
    c = Client(dev_server.url)
    try:
        yield c
    finally:
        c.close()


def _queue() -> str:
    return f"interop-sess-{uuid.uuid4().hex[:8]}"


def _outline(client: Client, workflow_id: str) -> List[str]:
    events = client.iter_history(workflow_id, client.describe_workflow(workflow_id).run_id or "")
    return [str(e["event_type"]) for e in events]


def _check(results: List[Dict[str, Any]], worker_ids: List[str]) -> None:
    for result in results:
        holders = {step["worker"] for step in result["pinned"]}
        assert len(holders) == 1 and holders <= set(worker_ids), result
        assert [step["step"] for step in result["pinned"]] == list(range(sdk_module.STEPS))


async def _sdk_workers(url: str, queue: str, count: int, body: Any) -> Any:
    client = SdkClient(url)
    workers = [SdkWorker(client, task_queue=queue, workflows=[sdk_module.Pinned], activities=[sdk_module.step],
                         poll_timeout=2.0, shutdown_timeout=10.0) for _ in range(count)]
    runners = [asyncio.create_task(w.run()) for w in workers]
    try:
        return await body(client, workers)
    finally:
        for w in workers:
            await w.stop()
        await asyncio.wait_for(asyncio.gather(*runners, return_exceptions=True), timeout=20)


def test_the_sdk_worker_pins_a_sessions_activities(dev_server: DevServer, client: Client) -> None:
    queue = _queue()

    async def body(sdk: SdkClient, workers: List[SdkWorker]) -> Any:
        results = []
        for _ in range(RUNS):
            handle = await sdk.start_workflow(workflow_type="interop.session.pinned", task_queue=queue,
                                              workflow_id=f"sdk-sess-{uuid.uuid4().hex[:8]}",
                                              input=[f"sdk-{uuid.uuid4().hex[:6]}"])
            results.append((handle.workflow_id, await sdk.get_result(handle, timeout=30)))
        return results, [w.worker_id for w in workers]

    done, worker_ids = run(_sdk_workers(dev_server.url, queue, 2, body))
    _check([r for _, r in done], worker_ids)
    outline = _outline(client, done[0][0])
    assert outline.count("ActivityScheduled") == sdk_module.STEPS + 1


def test_our_worker_runs_the_same_sdk_authored_session_workflow(ours: types.ModuleType, client: Client) -> None:
    queue = _queue()
    workers = [Worker(client, task_queue=queue, workflows=[ours.Pinned], activities=[ours.step], poll_timeout=2.0,
                      shutdown_timeout=10.0) for _ in range(2)]
    with RunningWorker(workers[0]), RunningWorker(workers[1]):
        handles = [client.start_workflow("interop.session.pinned", f"ours-{uuid.uuid4().hex[:6]}", task_queue=queue)
                   for _ in range(RUNS)]
        results = [h.result(timeout=30) for h in handles]
    _check(results, [w.worker_id for w in workers])
    assert _outline(client, handles[0].workflow_id).count("ActivityScheduled") == sdk_module.STEPS + 1


def test_mixed_workers_on_one_queue_keep_each_session_on_one_of_them(ours: types.ModuleType, dev_server: DevServer,
                                                                     client: Client) -> None:
    queue = _queue()
    mine = Worker(client, task_queue=queue, workflows=[ours.Pinned], activities=[ours.step], poll_timeout=2.0,
                  shutdown_timeout=10.0)

    async def body(sdk: SdkClient, workers: List[SdkWorker]) -> Any:
        handles = [await sdk.start_workflow(workflow_type="interop.session.pinned", task_queue=queue,
                                            workflow_id=f"mixed-sess-{uuid.uuid4().hex[:8]}",
                                            input=[f"mixed-{uuid.uuid4().hex[:6]}"]) for _ in range(4)]
        return [await sdk.get_result(h, timeout=40) for h in handles], [w.worker_id for w in workers]

    async def activities_only(url: str) -> Any:
        sdk = SdkClient(url)
        worker = SdkWorker(sdk, task_queue=queue, activities=[sdk_module.step], poll_timeout=2.0,
                           shutdown_timeout=10.0)
        runner = asyncio.create_task(worker.run())
        try:
            return await body(sdk, [worker])
        finally:
            await worker.stop()
            await asyncio.wait_for(runner, timeout=20)

    with RunningWorker(mine):
        results, sdk_ids = run(activities_only(dev_server.url))
    _check(results, [mine.worker_id, *sdk_ids])


def test_sdk_and_our_session_handles_speak_the_same_routes(dev_server: DevServer, client: Client) -> None:
    """The SDK's ``WorkerSession`` creates a session and its worker closes it on stop; our handle is
    then refused that id (explicit close is terminal, ``session_closed``) and creates its own."""
    queue = _queue()
    session_id = f"handles-{uuid.uuid4().hex[:6]}"

    async def sdk_side(url: str) -> Any:
        sdk = SdkClient(url)
        worker = SdkWorker(sdk, task_queue=queue, activities=[sdk_module.step], poll_timeout=2.0,
                           shutdown_timeout=10.0)
        runner = asyncio.create_task(worker.run())
        try:
            for _ in range(100):
                if getattr(worker, "_registered", False):
                    break
                await asyncio.sleep(0.05)
            handle = worker.worker_session(SdkOptions(session_id=session_id, lease_seconds=1))
            created = await handle.create()
            return worker.worker_id, created
        finally:
            await worker.stop()  # closes the session it holds before deregistering
            await asyncio.wait_for(runner, timeout=20)

    sdk_id, created = run(sdk_side(dev_server.url))
    assert created["outcome"] == "created" and created["session"]["lease_owner"] == sdk_id
    mine = Worker(client, task_queue=queue, activities=[sdk_module.step], poll_timeout=2.0, shutdown_timeout=5.0)
    with RunningWorker(mine):
        refused = None
        try:
            mine.worker_session(WorkerSessionOptions(session_id=session_id, lease_seconds=1)).create()
        except Exception as error:  # the SDK worker closed it on stop: terminal for the id
            refused = error
        assert refused is not None and getattr(refused, "status", None) == 409
        assert "session_closed" in str(refused)
        fresh = mine.worker_session(WorkerSessionOptions(session_id=f"{session_id}-2", lease_seconds=3))
        answer = fresh.create()
        assert answer["outcome"] == "created" and answer["session"]["lease_owner"] == mine.worker_id
        assert mine.task_slots()["session_available"] == 9
