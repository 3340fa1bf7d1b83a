"""The published SDK (``durable_workflow`` 2.12.0: its Client and Worker, unchanged) runs workflows
end to end against the dev server."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Dict, List

import pytest
import requests
from durable_workflow import ActivityRetryPolicy, Client, Worker, activity, workflow

from sync_worker.devserver import DevServer
from tests.interop._sdk import run, with_worker

_attempts: Dict[str, int] = {}
_attempts_lock = threading.Lock()


@activity.defn(name="interop.flaky")
def flaky(key: str) -> Dict[str, Any]:
    info = activity.context().info
    activity.context().heartbeat_sync({"progress": 1})
    with _attempts_lock:
        _attempts[key] = _attempts.get(key, 0) + 1
    if info.attempt_number == 1:
        raise RuntimeError(f"first attempt of {key} fails")
    return {"key": key, "attempt": info.attempt_number}


@activity.defn(name="interop.double")
def double(n: int) -> int:
    return n * 2


@workflow.defn(name="interop.retry")
class RetryWorkflow:
    def run(self, ctx: Any, key: str) -> Any:
        policy = ActivityRetryPolicy(max_attempts=3, initial_interval_seconds=1)
        result = yield ctx.schedule_activity("interop.flaky", [key], retry_policy=policy,
                                             start_to_close_timeout=30)
        return result


@workflow.defn(name="interop.child")
class ChildWorkflow:
    def run(self, ctx: Any, n: int) -> Any:
        doubled = yield ctx.schedule_activity("interop.double", [n])
        return {"child": doubled}


@workflow.defn(name="interop.kitchen_sink")
class KitchenSink:
    def __init__(self) -> None:
        self.stage = "starting"
        self.approved_by: Any = None

    @workflow.signal("approve")
    def approve(self, who: str) -> None:
        self.approved_by = who

    @workflow.query("stage")
    def current_stage(self) -> Dict[str, Any]:
        return {"stage": self.stage, "approved_by": self.approved_by}

    def run(self, ctx: Any, n: int) -> Any:
        token = yield ctx.side_effect(lambda: "side-effect-once")
        version = yield ctx.get_version("kitchen-change", 1, 2)
        yield ctx.start_timer(1)
        child = yield ctx.start_child_workflow("interop.child", [n])
        self.stage = "waiting"
        approved = yield ctx.wait_condition(lambda: self.approved_by is not None, timeout=30)
        self.stage = "done"
        return {"token": token, "version": version, "child": child, "approved": approved,
                "approved_by": self.approved_by}


@workflow.defn(name="interop.counter")
class Counter:
    def run(self, ctx: Any, n: int) -> Any:
        if n < 3:
            return ctx.continue_as_new(n + 1)
        return {"final": n}


def _events(server: DevServer, workflow_id: str, run_id: str) -> List[str]:
    resp = requests.get(f"{server.url}/api/workflows/{workflow_id}/runs/{run_id}/history",
                        headers={"X-Durable-Workflow-Control-Plane-Version": "2"}, timeout=10)
    resp.raise_for_status()
    return [e["event_type"] for e in resp.json()["events"]]


def test_activity_retry_with_heartbeat(dev_server: DevServer) -> None:
    async def body(client: Client, worker: Worker) -> Any:
        handle = await client.start_workflow(workflow_type="interop.retry", task_queue="q-retry",
                                             workflow_id="retry-1", input=["k1"])
        return handle, await client.get_result(handle, timeout=30)

    handle, result = run(with_worker(dev_server.url, "q-retry", body, workflows=[RetryWorkflow],
                                     activities=[flaky]))
    assert result == {"key": "k1", "attempt": 2}
    assert _attempts["k1"] == 2
    assert _events(dev_server, "retry-1", handle.run_id) == [
        "StartAccepted", "WorkflowStarted", "ActivityScheduled", "ActivityStarted", "ActivityRetryScheduled",
        "ActivityStarted", "ActivityCompleted", "WorkflowCompleted"]


def test_side_effect_version_timer_child_signal_query(dev_server: DevServer) -> None:
    async def body(client: Client, worker: Worker) -> Any:
        handle = await client.start_workflow(workflow_type="interop.kitchen_sink", task_queue="q-sink",
                                             workflow_id="sink-1", input=[21])
        deadline = time.monotonic() + 20
        state: Any = None
        while time.monotonic() < deadline:
            desc = await client.describe_workflow("sink-1")
            events = (await client.get_history("sink-1", desc.run_id))["events"]
            if any(e["event_type"] == "ConditionWaitOpened" for e in events):
                state = await client.query_workflow("sink-1", "stage")
                break
            await asyncio.sleep(0.1)
        await client.signal_workflow("sink-1", "approve", args=["alice"])
        return handle, state, await client.get_result(handle, timeout=30)

    handle, state, result = run(with_worker(dev_server.url, "q-sink", body,
                                            workflows=[KitchenSink, ChildWorkflow], activities=[double]))
    assert state is not None and state["result"] == {"stage": "waiting", "approved_by": None}
    assert result == {"token": "side-effect-once", "version": 2, "child": {"child": 42}, "approved": True,
                      "approved_by": "alice"}
    events = _events(dev_server, "sink-1", handle.run_id)
    assert events == [
        "StartAccepted", "WorkflowStarted", "SideEffectRecorded", "VersionMarkerRecorded", "TimerScheduled",
        "TimerFired", "ChildWorkflowScheduled", "ChildRunStarted", "ChildRunCompleted", "ConditionWaitOpened",
        "SignalReceived", "MessageCursorAdvanced", "SignalApplied", "ConditionWaitSatisfied", "WorkflowCompleted"]


def test_continue_as_new_follows_newest_run(dev_server: DevServer) -> None:
    async def body(client: Client, worker: Worker) -> Any:
        first = await client.start_workflow(workflow_type="interop.counter", task_queue="q-can",
                                            workflow_id="can-1", input=[0])
        # an unpinned handle follows describe's newest run (a pinned one would see the first run only)
        unpinned = client.get_workflow_handle("can-1")
        result = await client.get_result(unpinned, timeout=30)
        desc = await client.describe_workflow("can-1")
        return first, result, desc

    first, result, desc = run(with_worker(dev_server.url, "q-can", body, workflows=[Counter]))
    assert result == {"final": 3}
    assert desc.run_id != first.run_id and desc.status == "completed"
    assert _events(dev_server, "can-1", first.run_id)[-1] == "WorkflowContinuedAsNew"
    assert _events(dev_server, "can-1", desc.run_id) == ["WorkflowStarted", "WorkflowCompleted"]


def test_standalone_activity(dev_server: DevServer) -> None:
    async def body(client: Client, worker: Worker) -> Any:
        handle = await client.start_activity(activity_type="interop.double", task_queue="q-standalone",
                                             activity_id="standalone-1", input=[5])
        return await client.get_activity_result(handle, timeout=20)

    assert run(with_worker(dev_server.url, "q-standalone", body, activities=[double])) == 10
    resp = requests.get(f"{dev_server.url}/api/activities/standalone-1",
                        headers={"X-Durable-Workflow-Control-Plane-Version": "2"}, timeout=10)
    assert resp.json()["status"] == "completed" and resp.json()["attempt_count"] == 1


def test_worker_stop_deregisters_with_fencing(dev_server: DevServer) -> None:
    seen: Dict[str, Any] = {}

    async def body(client: Client, worker: Worker) -> Any:
        seen["worker_id"] = worker.worker_id
        handle = await client.start_workflow(workflow_type="interop.child", task_queue="q-stop",
                                             workflow_id="stop-1", input=[1])
        return await client.get_result(handle, timeout=20)

    assert run(with_worker(dev_server.url, "q-stop", body, workflows=[ChildWorkflow],
                           activities=[double])) == {"child": 2}
    resp = requests.get(f"{dev_server.url}/api/workers/{seen['worker_id']}",
                        headers={"X-Durable-Workflow-Control-Plane-Version": "2"}, timeout=10)
    assert resp.status_code == 200
    assert resp.json()["status"] == "deregistered"


@pytest.mark.parametrize("token", ["s3cret"])
def test_token_and_namespace_are_honoured(token: str) -> None:
    with DevServer(token=token, namespaces=("default", "team-a")) as server:
        async def body(client: Client, worker: Worker) -> Any:
            handle = await client.start_workflow(workflow_type="interop.child", task_queue="q-ns",
                                                 workflow_id="ns-1", input=[4])
            return await client.get_result(handle, timeout=20)

        assert run(with_worker(server.url, "q-ns", body, workflows=[ChildWorkflow], activities=[double],
                               namespace="team-a", token=token)) == {"child": 8}
        headers = {"X-Durable-Workflow-Control-Plane-Version": "2", "Authorization": f"Bearer {token}"}
        other = requests.get(f"{server.url}/api/workflows/ns-1", headers={**headers, "X-Namespace": "default"},
                             timeout=10)
        assert other.status_code == 404
        mine = requests.get(f"{server.url}/api/workflows/ns-1", headers={**headers, "X-Namespace": "team-a"},
                            timeout=10)
        assert mine.json()["status"] == "completed"


@workflow.defn(name="interop.updatable")
class Updatable:
    def __init__(self) -> None:
        self.name = "initial"
        self.finish = False

    @workflow.update("rename")
    def rename(self, name: str) -> str:
        self.name = name
        return f"renamed to {name}"

    @workflow.signal("finish")
    def on_finish(self) -> None:
        self.finish = True

    def run(self, ctx: Any) -> Any:
        yield ctx.wait_condition(lambda: self.finish)
        return self.name


def test_update_then_signal(dev_server: DevServer) -> None:
    async def body(client: Client, worker: Worker) -> Any:
        handle = await client.start_workflow(workflow_type="interop.updatable", task_queue="q-upd",
                                             workflow_id="upd-1", input=[])
        deadline = time.monotonic() + 20
        while "ConditionWaitOpened" not in _events(dev_server, "upd-1", handle.run_id):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        reply = await client.update_workflow("upd-1", "rename", args=["bob"], wait_for="completed")
        await client.signal_workflow("upd-1", "finish")
        return handle, reply, await client.get_result(handle, timeout=20)

    handle, reply, result = run(with_worker(dev_server.url, "q-upd", body, workflows=[Updatable]))
    assert reply["result"] == "renamed to bob"
    assert result == "bob"
    events = _events(dev_server, "upd-1", handle.run_id)
    assert events[:6] == ["StartAccepted", "WorkflowStarted", "ConditionWaitOpened", "UpdateAccepted",
                          "UpdateApplied", "UpdateCompleted"]
    assert events[-1] == "WorkflowCompleted"


def test_client_read_routes(dev_server: DevServer) -> None:
    async def body(client: Client, worker: Worker) -> Any:
        handle = await client.start_workflow(workflow_type="interop.counter", task_queue="q-read",
                                             workflow_id="read-1", input=[2],
                                             search_attributes={"Tenant": "acme"}, memo={"note": "hi"})
        await client.get_result(client.get_workflow_handle("read-1"), timeout=20)
        runs = await client.list_workflow_runs("read-1")
        first = await client.describe_workflow_run("read-1", handle.run_id)
        listing = await client.list_workflows(workflow_type="interop.counter")
        workers = await client.list_workers(task_queue="q-read")
        health = await client.health()
        return runs, first, listing, workers, health

    runs, first, listing, workers, health = run(with_worker(dev_server.url, "q-read", body, workflows=[Counter]))
    assert runs.run_count == 2 and [r.run_number for r in runs.runs] == [1, 2]
    assert [r.is_current_run for r in runs.runs] == [False, True]
    assert first.status == "continued" and first.search_attributes == {"Tenant": "acme"}
    assert [w.workflow_id for w in listing.executions] == ["read-1"]
    assert listing.executions[0].status == "completed"
    assert len(workers.workers) == 1
    assert health["status"] == "serving"


@activity.defn(name="interop.refuse")
def refuse(n: int) -> int:
    raise ValueError(f"refusing {n}")


@workflow.defn(name="interop.local")
class LocalActivities:
    def run(self, ctx: Any, n: int) -> Any:
        first = yield ctx.local_activity("interop.double", [n])
        try:
            yield ctx.local_activity("interop.refuse", [n])
            refused = None
        except Exception as exc:  # the SDK raises ActivityFailed for a failed local activity
            refused = type(exc).__name__
        yield ctx.start_timer(0)  # forces a replay of the recorded local outcomes
        second = yield ctx.local_activity("interop.double", [first])
        return [first, second, refused]


def test_local_activities_are_recorded_and_replayed(dev_server: DevServer) -> None:
    async def body(client: Client, worker: Worker) -> Any:
        handle = await client.start_workflow(workflow_type="interop.local", task_queue="q-local",
                                             workflow_id="local-1", input=[3])
        return handle, await client.get_result(handle, timeout=20)

    handle, result = run(with_worker(dev_server.url, "q-local", body, workflows=[LocalActivities],
                                     activities=[double, refuse]))
    assert result == [6, 12, "ActivityFailed"]
    assert _events(dev_server, "local-1", handle.run_id) == [
        "StartAccepted", "WorkflowStarted", "ActivityScheduled", "ActivityCompleted", "ActivityScheduled",
        "ActivityFailed", "TimerScheduled", "TimerFired", "ActivityScheduled", "ActivityCompleted",
        "WorkflowCompleted"]


@activity.defn(name="interop.sleepy")
def sleepy(label: str, seconds: float) -> str:
    time.sleep(seconds)
    return label


@activity.defn(name="interop.fatal")
def fatal() -> None:
    raise RuntimeError("fatal activity")


@workflow.defn(name="interop.parallel")
class Parallel:
    def __init__(self) -> None:
        self.pokes = 0

    @workflow.signal("poke")
    def poke(self) -> None:
        self.pokes += 1

    def run(self, ctx: Any) -> Any:
        results = yield [ctx.schedule_activity("interop.sleepy", ["slow", 0.8]),
                         ctx.schedule_activity("interop.sleepy", ["fast", 0.0]), ctx.start_timer(1)]
        satisfied = yield ctx.wait_condition(lambda: self.pokes >= 5, timeout=1)
        return {"results": results, "pokes": self.pokes, "satisfied": satisfied}


@workflow.defn(name="interop.failing_child")
class FailingChild:
    def run(self, ctx: Any) -> Any:
        yield ctx.schedule_activity("interop.fatal", [], retry_policy=ActivityRetryPolicy(max_attempts=1))
        return "unreachable"


@workflow.defn(name="interop.parent_of_failure")
class ParentOfFailure:
    def run(self, ctx: Any) -> Any:
        try:
            yield ctx.start_child_workflow("interop.failing_child", [])
        except Exception as exc:
            raise ValueError(f"child failed: {type(exc).__name__}") from exc
        return "unreachable"


def test_parallel_group_signal_mid_group_and_condition_timeout(dev_server: DevServer) -> None:
    async def body(client: Client, worker: Worker) -> Any:
        handle = await client.start_workflow(workflow_type="interop.parallel", task_queue="q-par",
                                             workflow_id="par-1", input=[])
        deadline = time.monotonic() + 10
        while _events(dev_server, "par-1", handle.run_id).count("ActivityCompleted") < 1:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        await client.signal_workflow("par-1", "poke")  # the group is only partly resolved
        return handle, await client.get_result(handle, timeout=20)

    handle, result = run(with_worker(dev_server.url, "q-par", body, workflows=[Parallel], activities=[sleepy]))
    assert result == {"results": ["slow", "fast", None], "pokes": 1, "satisfied": False}
    events = _events(dev_server, "par-1", handle.run_id)
    assert events.count("ActivityScheduled") == 2 and events.count("TimerScheduled") == 1
    assert events[-3:] == ["ConditionWaitOpened", "TimerFired", "WorkflowCompleted"]


def test_child_failure_reaches_the_parent(dev_server: DevServer) -> None:
    from durable_workflow.errors import WorkflowFailed

    async def body(client: Client, worker: Worker) -> Any:
        handle = await client.start_workflow(workflow_type="interop.parent_of_failure", task_queue="q-cf",
                                             workflow_id="cf-1", input=[])
        with pytest.raises(WorkflowFailed) as failure:
            await client.get_result(handle, timeout=20)
        return handle, str(failure.value)

    handle, message = run(with_worker(dev_server.url, "q-cf", body, workflows=[ParentOfFailure, FailingChild],
                                      activities=[fatal]))
    assert "child failed: ChildWorkflowFailed" in message
    assert _events(dev_server, "cf-1", handle.run_id) == [
        "StartAccepted", "WorkflowStarted", "ChildWorkflowScheduled", "ChildRunStarted", "ChildRunFailed",
        "WorkflowFailed"]


@workflow.defn(name="interop.memo")
class MemoWorkflow:
    def run(self, ctx: Any) -> Any:
        yield ctx.upsert_memo({"stage": "one", "count": 1})
        yield ctx.upsert_search_attributes({"Stage": "one"})
        yield ctx.start_timer(0)  # replays the recorded upserts
        yield ctx.upsert_memo({"stage": "two", "origin": None})
        return "done"


def test_memo_and_search_attribute_upserts(dev_server: DevServer) -> None:
    async def body(client: Client, worker: Worker) -> Any:
        handle = await client.start_workflow(workflow_type="interop.memo", task_queue="q-memo", workflow_id="memo-1",
                                             input=[], memo={"origin": "test"})
        result = await client.get_result(handle, timeout=20)
        return handle, result, await client.describe_workflow("memo-1")

    handle, result, desc = run(with_worker(dev_server.url, "q-memo", body, workflows=[MemoWorkflow]))
    assert result == "done"
    assert desc.memo == {"stage": "two", "count": 1}
    assert desc.search_attributes == {"Stage": "one"}
    assert _events(dev_server, "memo-1", handle.run_id) == [
        "StartAccepted", "WorkflowStarted", "MemoUpserted", "SearchAttributesUpserted", "TimerScheduled",
        "TimerFired", "MemoUpserted", "WorkflowCompleted"]
