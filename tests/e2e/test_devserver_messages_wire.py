"""The dev server's message rules with the published SDK's worker (``durable_workflow`` 2.12), over sockets.

The SDK ignores the poll's resume context and applies every signal it finds in history; the
server still applies one message per workflow task, in message order. A signal task the worker
released (nothing to record while an activity runs) applies its signal, as the PHP server takes
that acknowledgment, so nothing is handed out again and again and nothing queues behind it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Dict, List

import pytest

from sync_worker.devserver import DevServer
from tests._sdk_missing import SDK_MISSING

durable_workflow = pytest.importorskip("durable_workflow", reason=SDK_MISSING)
from durable_workflow import Client, activity, workflow  # noqa: E402

from tests.interop._sdk import run, with_worker  # noqa: E402


@activity.defn(name="wire.v1.pause")
async def pause(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@workflow.defn(name="wire.v1.signal_during_activity")
class SignalDuringActivity:
    def __init__(self) -> None:
        self.got: Any = None

    @workflow.signal("go")
    def go(self, value: Any) -> None:
        self.got = value

    def run(self, ctx: Any) -> Any:
        yield ctx.schedule_activity("wire.v1.pause", [1.5])
        yield ctx.wait_condition(lambda: self.got is not None)
        return self.got


@workflow.defn(name="wire.v1.ordered")
class Ordered:
    def __init__(self) -> None:
        self.inbox: List[Any] = []

    @workflow.signal("add")
    def add(self, value: Any) -> None:
        self.inbox.append(value)

    @workflow.update("add_now")
    def add_now(self, value: Any) -> int:
        self.inbox.append(value)
        return len(self.inbox)

    def run(self, ctx: Any) -> Any:
        yield ctx.wait_condition(lambda: len(self.inbox) >= 3)
        return list(self.inbox)


def _types(events: List[Dict[str, Any]]) -> List[str]:
    return [str(e["event_type"]) for e in events]


async def _history(client: Client, workflow_id: str) -> List[Dict[str, Any]]:
    desc = await client.describe_workflow(workflow_id)
    return list((await client.get_history(workflow_id, desc.run_id))["events"])


async def _until(client: Client, workflow_id: str, predicate: Callable[[List[str]], bool]) -> None:
    deadline = time.monotonic() + 20
    while not predicate(_types(await _history(client, workflow_id))):
        assert time.monotonic() < deadline, _types(await _history(client, workflow_id))
        await asyncio.sleep(0.05)


def _task_count(server: DevServer, run_id: str) -> int:
    engine = server._engine
    assert engine is not None
    with engine.lock:
        return engine.store.count("wf_tasks", "run_id = ?", (run_id,))


def test_a_signal_sent_during_an_activity_is_applied_once_without_spinning(dev_server: DevServer) -> None:
    async def body(client: Client, worker: Any) -> Any:
        handle = await client.start_workflow(workflow_type="wire.v1.signal_during_activity", task_queue="wire-a",
                                             workflow_id="wire-signal-during-activity", input=[])
        await _until(client, handle.workflow_id, lambda kinds: "ActivityStarted" in kinds)
        await client.signal_workflow(handle.workflow_id, "go", args=["now"])
        result = await client.get_result(handle, timeout=30)
        return handle, result, await _history(client, handle.workflow_id)

    handle, result, events = run(with_worker(dev_server.url, "wire-a", body, workflows=[SignalDuringActivity],
                                             activities=[pause]))
    assert result == "now"
    kinds = _types(events)
    assert kinds.count("SignalApplied") == 1 and kinds[-1] == "WorkflowCompleted"
    # the signal task was released while the activity ran: that acknowledgment applied the signal
    assert kinds.index("SignalReceived") < kinds.index("SignalApplied") < kinds.index("ActivityCompleted")
    # start, the released signal task, the task after the activity: not one task per round trip
    assert _task_count(dev_server, handle.run_id) <= 4


def test_signals_and_an_update_are_applied_one_per_task_in_order(dev_server: DevServer) -> None:
    async def body(client: Client, worker: Any) -> Any:
        handle = await client.start_workflow(workflow_type="wire.v1.ordered", task_queue="wire-b",
                                             workflow_id="wire-ordered", input=[])
        await _until(client, handle.workflow_id, lambda kinds: "ConditionWaitOpened" in kinds)
        await client.signal_workflow(handle.workflow_id, "add", args=["first"])
        await client.update_workflow(handle.workflow_id, "add_now", args=["second"], wait_for="accepted")
        await client.signal_workflow(handle.workflow_id, "add", args=["third"])
        result = await client.get_result(handle, timeout=30)
        return result, await _history(client, handle.workflow_id)

    result, events = run(with_worker(dev_server.url, "wire-b", body, workflows=[Ordered]))
    applied = [e for e in _types(events) if e in ("SignalApplied", "UpdateApplied")]
    received = [e["payload"]["signal_id"] for e in events if e["event_type"] == "SignalReceived"]
    signals = [e["payload"]["signal_id"] for e in events if e["event_type"] == "SignalApplied"]
    assert applied[:2] == ["SignalApplied", "UpdateApplied"]  # the update waited behind the earlier signal
    assert signals == received[:len(signals)]  # each applied once, in order
    assert "first" in result and "second" in result
    cursors = [e["payload"] for e in events if e["event_type"] == "MessageCursorAdvanced"]
    assert [c["new_position"] for c in cursors] == list(range(1, len(cursors) + 1))  # declares an update
