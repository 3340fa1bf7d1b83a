"""Import swap, for real: ONE source text of a workflow module written against the published SDK
(``tests/interop/_sdk_authored_workflows.py``) runs on the published SDK's Worker as it is, and on
sync_worker's Worker once only its import line is textually replaced; both give the same results and
the same history inventories on the dev server.
"""

from __future__ import annotations

import sys
import types
import uuid
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from durable_workflow import Client as SdkClient
from durable_workflow import Worker as SdkWorker

import sync_worker
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.worker import Worker
from tests._import_swap import load_with_sync_worker_imports
from tests.e2e._worker_support import RunningWorker, wait_for
from tests.interop import _sdk_authored_workflows as sdk_module
from tests.interop._sdk import run, with_worker

SWAPPED_NAME = f"{sdk_module.__name__}__sync_worker"


def load_swapped_module() -> types.ModuleType:
    """The SDK-authored module with only its import line replaced (see ``tests._import_swap``)."""
    return load_with_sync_worker_imports(sdk_module)


@pytest.fixture(scope="module")
def swapped() -> Iterator[types.ModuleType]:
    module = load_swapped_module()
    try:
        yield module
    finally:
        sys.modules.pop(SWAPPED_NAME, None)


def _outline(events: List[Dict[str, Any]]) -> List[str]:
    return [str(e["event_type"]) for e in events]


# -- the scenario, driven once per worker ----------------------------------------------------------
ORDER_ARGS = ("ada", 21)
COUNTDOWN_ARGS: Tuple[int, List[int]] = (3, [])
WAIT_OPENED = "ConditionWaitOpened"


def _drive_ours(server: DevServer, module: types.ModuleType) -> Tuple[Any, Any, List[str], List[Any]]:
    queue = f"swap-sw-{uuid.uuid4().hex[:8]}"
    client = Client(server.url)
    worker = Worker(client, task_queue=queue, workflows=module.WORKFLOWS, activities=module.ACTIVITIES,
                    poll_timeout=2.0, shutdown_timeout=10.0)
    try:
        with RunningWorker(worker) as running:
            order = client.start_workflow("interop.swap.order", *ORDER_ARGS, task_queue=queue)
            stages = [wait_for(lambda: (s := client.query_workflow(order.workflow_id, module.STAGE_QUERY)["result"])
                               ["stage"] == "awaiting-approval" and s, timeout=20)]
            # A query replays the history to its end, so it can see the stage before the workflow task
            # that opened the wait is recorded: signal once the wait is, on both workers, so the two
            # histories do not depend on which of the signal and that completion lands first.
            run_id = client.describe_workflow(order.workflow_id).run_id or ""
            wait_for(lambda: WAIT_OPENED in _outline(list(client.iter_history(order.workflow_id, run_id))), timeout=20)
            client.signal_workflow(order.workflow_id, module.APPROVE_SIGNAL, args=["grace"])
            order_result = client.get_result(order.workflow_id, timeout=30, poll_interval=0.1)
            stages.append(client.query_workflow(order.workflow_id, module.STAGE_QUERY)["result"])
            events = list(client.iter_history(order.workflow_id, client.describe_workflow(order.workflow_id).run_id
                                              or ""))
            countdown = client.start_workflow("interop.swap.countdown", *COUNTDOWN_ARGS, task_queue=queue)
            countdown_result = client.get_result(countdown.workflow_id, timeout=30, poll_interval=0.1)
            assert len(client.list_runs(countdown.workflow_id)) == 3
            assert running.stop() is None
    finally:
        client.close()
    return order_result, countdown_result, _outline(events), stages


def _drive_sdk(server: DevServer) -> Tuple[Any, Any, List[str], List[Any]]:
    queue = f"swap-sdk-{uuid.uuid4().hex[:8]}"

    async def body(client: SdkClient, worker: SdkWorker) -> Tuple[Any, Any, List[str], List[Any]]:
        import asyncio

        order = await client.start_workflow(workflow_type="interop.swap.order", task_queue=queue,
                                            workflow_id=f"swap-sdk-order-{uuid.uuid4().hex[:8]}",
                                            input=list(ORDER_ARGS))
        stages: List[Any] = []
        for _ in range(400):
            answer = await client.query_workflow(order.workflow_id, sdk_module.STAGE_QUERY)
            if answer["result"]["stage"] == "awaiting-approval":
                stages.append(answer["result"])
                break
            await asyncio.sleep(0.05)
        run_id = (await client.describe_workflow(order.workflow_id)).run_id or ""
        for _ in range(400):  # as on ours: signal once the wait is recorded
            if WAIT_OPENED in _outline((await client.get_history(order.workflow_id, run_id))["events"]):
                break
            await asyncio.sleep(0.05)
        await client.signal_workflow(order.workflow_id, sdk_module.APPROVE_SIGNAL, args=["grace"])
        order_result = await client.get_result(order, timeout=30)
        stages.append((await client.query_workflow(order.workflow_id, sdk_module.STAGE_QUERY))["result"])
        desc = await client.describe_workflow(order.workflow_id)
        events = (await client.get_history(order.workflow_id, desc.run_id or ""))["events"]
        countdown = await client.start_workflow(workflow_type="interop.swap.countdown", task_queue=queue,
                                                workflow_id=f"swap-sdk-countdown-{uuid.uuid4().hex[:8]}",
                                                input=list(COUNTDOWN_ARGS))
        # an unpinned handle follows the continue-as-new chain to its final run
        countdown_result = await client.get_result(client.get_workflow_handle(countdown.workflow_id), timeout=30)
        return order_result, countdown_result, _outline(events), stages

    return run(with_worker(server.url, queue, body, workflows=sdk_module.WORKFLOWS,
                           activities=sdk_module.ACTIVITIES))


# -- tests -----------------------------------------------------------------------------------------
def test_swapped_module_is_bound_to_sync_worker_only(swapped: types.ModuleType) -> None:
    assert swapped.workflow is sync_worker.workflow and swapped.activity is sync_worker.activity
    assert {v.__name__.split(".")[0] for v in vars(swapped).values() if isinstance(v, types.ModuleType)} == \
        {"sync_worker"}
    assert [w.__name__ for w in swapped.WORKFLOWS] == [w.__name__ for w in sdk_module.WORKFLOWS]
    assert swapped.Order is not sdk_module.Order


def test_same_module_same_results_on_both_workers(dev_server: DevServer, swapped: types.ModuleType) -> None:
    sdk_order, sdk_countdown, sdk_events, sdk_stages = _drive_sdk(dev_server)
    our_order, our_countdown, our_events, our_stages = _drive_ours(dev_server, swapped)

    expected_order = {"greeting": "hello ada", "marker": "marker-21", "version": 2, "approved": True,
                      "approved_by": "grace", "doubles": [2, 4, 42], "child": {"child_of": 21, "doubled": 42}}
    assert sdk_order == expected_order  # the published SDK's own answer is the reference
    assert our_order == sdk_order
    assert our_countdown == sdk_countdown == {"collected": [6, 4, 2], "big": 9007199254740993}
    assert our_stages == sdk_stages == [{"stage": "awaiting-approval", "approved_by": None},
                                        {"stage": "done", "approved_by": "grace"}]
    # the members of the parallel group start/complete in whatever order the activity slots take them
    racy = ("ActivityStarted", "ActivityCompleted")
    assert [e for e in our_events if e not in racy] == [e for e in sdk_events if e not in racy], \
        f"the two workers produced different histories:\n{our_events}\n{sdk_events}"
    assert sorted(our_events) == sorted(sdk_events)
    for kind in ("SideEffectRecorded", "VersionMarkerRecorded", "TimerFired", "ConditionWaitSatisfied",
                 "ChildRunCompleted", "WorkflowCompleted"):
        assert kind in our_events, kind
    assert our_events.count("ActivityCompleted") == 4
