"""The published SDK's own clients (``durable_workflow`` 2.12.0, unchanged: the asyncio ``Client``
and the blocking ``durable_workflow.sync.Client``) drive namespaces, schedules and updates on the
dev server end to end, with the SDK's own ``Worker`` executing the workflows."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Dict, List, Optional

import pytest
import requests
from durable_workflow import Client, Worker, workflow
from durable_workflow.client import ScheduleAction, ScheduleSpec
from durable_workflow.errors import ServerError, WorkflowNotFound
from durable_workflow.sync import Client as SyncClient

from sync_worker.devserver import DevServer
from tests.interop._sdk import run, with_worker

BIG = 9007199254740993
HEADERS = {"X-Durable-Workflow-Control-Plane-Version": "2"}


def _events(server: DevServer, workflow_id: str, namespace: str = "default") -> List[Dict[str, Any]]:
    headers = {**HEADERS, "X-Namespace": namespace}
    described = requests.get(f"{server.url}/api/workflows/{workflow_id}", headers=headers, timeout=10).json()
    url = f"{server.url}/api/workflows/{workflow_id}/runs/{described['run_id']}/history"
    return list(requests.get(url, headers=headers, timeout=10).json()["events"])


def _schedule_history(url: str, schedule_id: str, **kwargs: Any) -> Any:
    """The sync facade has no schedule history: read it with the SDK's asyncio client."""
    async def read() -> Any:
        client = Client(url)
        try:
            return await client.get_schedule_history(schedule_id, **kwargs)
        finally:
            await client.aclose()
    return run(read())


def _message_events(server: DevServer, workflow_id: str) -> List[Dict[str, Any]]:
    """Update, signal and cursor events (a replay after an update may re-open the wait meanwhile)."""
    return [e for e in _events(server, workflow_id)
            if e["event_type"].startswith(("Update", "Signal")) or e["event_type"] == "MessageCursorAdvanced"]


def _kinds(events: List[Dict[str, Any]]) -> List[str]:
    return [e["event_type"] for e in events]


@workflow.defn(name="interop.cp.echo")
class Echo:
    def run(self, ctx: Any, value: Any) -> Any:
        return {"echo": value}
        yield  # a generator workflow that completes on its first task


@workflow.defn(name="parity.v1.updates")
class Updates:
    """ServerParity ``state-updates``: typed updates applied to a run blocked on a finishing signal."""

    def __init__(self) -> None:
        self.values: List[Any] = []
        self.finish = False

    @workflow.update("set_payload")
    def set_payload(self, value: Any) -> Any:
        self.values.append(value)
        return {"value": value, "applied": len(self.values)}

    @workflow.signal("finish")
    def on_finish(self, value: Any) -> None:
        self.finish = bool(value.get("finish"))

    def run(self, ctx: Any, start: Any) -> Any:
        yield ctx.wait_condition(lambda: self.finish, key="finish")
        return {"values": self.values}


def test_namespaces_with_the_sdk_clients(dev_server: DevServer) -> None:
    admin = SyncClient(dev_server.url)
    try:
        created = admin.create_namespace("Interop-Team", description="Shared namespace contract λ", retention_days=45)
        assert (created.name, created.description, created.retention_days, created.status) == (
            "interop-team", "Shared namespace contract λ", 45, "active")
        assert admin.describe_namespace("INTEROP-TEAM").created_at == created.created_at
        assert "interop-team" in [n.name for n in admin.list_namespaces().namespaces]
        updated = admin.update_namespace("interop-team", retention_days=60)
        assert (updated.retention_days, updated.description) == (60, "Shared namespace contract λ")

        async def body(client: Client, worker: Worker) -> Any:
            handle = await client.start_workflow(workflow_type="interop.cp.echo", task_queue="q-ns",
                                                 workflow_id="interop-ns-1", input=[{"count": BIG}])
            return await client.get_result(handle, timeout=20)

        result = run(with_worker(dev_server.url, "q-ns", body, workflows=[Echo], namespace="interop-team"))
        assert result == {"echo": {"count": BIG}}

        with pytest.raises(Exception) as refused:  # the id stays reserved across namespaces
            admin.start_workflow(workflow_type="interop.cp.echo", task_queue="q-ns", workflow_id="interop-ns-1")
        assert isinstance(refused.value, ServerError) and refused.value.status == 409
        assert refused.value.body["reason"] == "workflow_id_reserved_in_namespace"
        with pytest.raises(WorkflowNotFound):  # a foreign read is refused like a missing workflow
            admin.describe_workflow("interop-ns-1")

        deleted = admin.delete_namespace("interop-team")
        assert deleted.status == "deleted" and deleted.deleted is not None
        assert deleted.deleted["workflow_runs"] == 1
        assert "interop-team" not in [n.name for n in admin.list_namespaces().namespaces]
    finally:
        admin.close()


def test_schedules_fire_sdk_workflows_on_the_server_clock(dev_server: DevServer) -> None:
    async def body(client: Client, worker: Worker) -> Any:
        handle = await client.create_schedule(
            schedule_id="interop-every-second",
            spec=ScheduleSpec(intervals=[{"every": "PT1S"}], timezone="UTC"),
            action=ScheduleAction(workflow_type="interop.cp.echo", task_queue="q-sched", input=[{"n": BIG}],
                                  execution_timeout_seconds=3600, run_timeout_seconds=600),
            overlap_policy="allow_all", max_runs=2, memo={"team": "interop"}, note="two fires")
        assert handle.schedule_id == "interop-every-second"
        deadline = time.monotonic() + 15
        while True:
            page = await client.get_schedule_history("interop-every-second", limit=100)
            kinds = [e.event_type for e in page.events]
            if "ScheduleDeleted" in kinds:
                break
            assert time.monotonic() < deadline, kinds
            await asyncio.sleep(0.1)
        fired = [e for e in page.events if e.event_type == "ScheduleTriggered"]
        results = [await client.get_result(client.get_workflow_handle(e.workflow_instance_id or ""), timeout=20)
                   for e in fired]
        return page, fired, results

    page, fired, results = run(with_worker(dev_server.url, "q-sched", body, workflows=[Echo]))
    assert [e.event_type for e in page.events] == ["ScheduleCreated", "ScheduleTriggered", "ScheduleTriggered",
                                                  "ScheduleDeleted"]
    assert page.events[-1].payload is not None and page.events[-1].payload["reason"] == "max_runs_exhausted"
    assert results == [{"echo": {"n": BIG}}, {"echo": {"n": BIG}}]
    for event in fired:
        history = _events(dev_server, event.workflow_instance_id or "")
        assert _kinds(history) == ["StartAccepted", "WorkflowStarted", "ScheduleTriggered", "WorkflowCompleted"]
        assert history[2]["payload"]["schedule_id"] == "interop-every-second"


def test_schedule_administration_with_the_sync_facade(dev_server: DevServer) -> None:
    client = SyncClient(dev_server.url)
    try:
        client.create_schedule(
            schedule_id="daily-inventory-check",
            spec=ScheduleSpec(cron_expressions=["15 7 * * *"], timezone="UTC"),
            action=ScheduleAction(workflow_type="inventory.check", task_queue="q-admin",
                                  input=[{"warehouse": "west-1", "threshold": 25}]),
            overlap_policy="buffer_one", jitter_seconds=45, max_runs=30, paused=True,
            note="created from parity fixture")
        described = client.describe_schedule("daily-inventory-check")
        assert (described.status, described.overlap_policy, described.jitter_seconds, described.max_runs,
                described.remaining_actions, described.note) == ("paused", "buffer_one", 45, 30, 30,
                                                                 "created from parity fixture")
        skipped = client.trigger_schedule("daily-inventory-check")
        assert (skipped.outcome, skipped.reason) == ("skipped", "status_not_triggerable")
        client.resume_schedule("daily-inventory-check", note="go")
        listed = client.list_schedules(status="active")
        assert [s.schedule_id for s in listed.schedules] == ["daily-inventory-check"]
        assert listed.schedules[0].next_fire_at is not None and listed.schedules[0].next_fire_at.endswith("Z")
        first = client.trigger_schedule("daily-inventory-check")
        assert first.outcome == "triggered" and first.workflow_id
        buffered = client.trigger_schedule("daily-inventory-check")
        assert (buffered.outcome, buffered.buffer_depth) == ("buffered", 1)
        client.update_schedule("daily-inventory-check", spec=ScheduleSpec(intervals=[{"every": "PT30M"}]),
                               overlap_policy="allow_all", note="tighten inventory threshold")
        backfill = client.backfill_schedule("daily-inventory-check", start_time="2026-04-20T00:00:00Z",
                                            end_time="2026-04-20T03:00:00Z")
        assert (backfill.outcome, backfill.fires_attempted) == ("accepted", 6)
        client.pause_schedule("daily-inventory-check", note="operator maintenance window")
        history = _schedule_history(dev_server.url, "daily-inventory-check", limit=3)
        assert history.has_more and history.next_cursor == 3
        rest = _schedule_history(dev_server.url, "daily-inventory-check", after_sequence=history.next_cursor)
        kinds = [e.event_type for e in history.events + rest.events]
        assert kinds[:5] == ["ScheduleCreated", "ScheduleTriggerSkipped", "ScheduleResumed", "ScheduleTriggered",
                             "ScheduleUpdated"]
        assert kinds.count("ScheduleTriggered") == 7 and kinds[-1] == "SchedulePaused"
        client.delete_schedule("daily-inventory-check")
        assert client.list_schedules().schedules == []
        after = _schedule_history(dev_server.url, "daily-inventory-check", after_sequence=len(kinds))
        assert [e.event_type for e in after.events] == ["ScheduleDeleted"]
    finally:
        client.close()


def test_state_updates_with_the_sdk(dev_server: DevServer) -> None:
    first_value = {"message": "first update λ", "number": BIG, "optional": None}
    second_value = {"message": "second update λ", "number": 42, "ready": True}
    duplicate = {"message": "duplicate must not apply"}

    async def body(client: Client, worker: Worker) -> Any:
        handle = await client.start_workflow(workflow_type="parity.v1.updates", task_queue="q-upd-parity",
                                             workflow_id="parity-state-updates",
                                             input=[{"message": "original workflow λ"}])
        deadline = time.monotonic() + 20
        while "ConditionWaitOpened" not in _kinds(_events(dev_server, "parity-state-updates")):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        replies: List[Optional[Dict[str, Any]]] = []
        for key, value in (("update-1", first_value), ("update-2", second_value)):
            replies.append(await client.update_workflow("parity-state-updates", "set_payload", args=[value],
                                                        wait_for="completed", request_id=key))
            before = _message_events(dev_server, "parity-state-updates")
            again = await client.update_workflow("parity-state-updates", "set_payload", args=[duplicate],
                                                 wait_for="completed", request_id=key)
            assert again["update_id"] == replies[-1]["update_id"]  # type: ignore[index]
            assert again["result"] == replies[-1]["result"] and again.get("retained") is True  # type: ignore[index]
            assert _message_events(dev_server, "parity-state-updates") == before  # nothing recorded again
        await client.signal_workflow("parity-state-updates", "finish", args=[{"finish": True}])
        return replies, await client.get_result(handle, timeout=20)

    replies, result = run(with_worker(dev_server.url, "q-upd-parity", body, workflows=[Updates]))
    assert [r["result"] for r in replies] == [{"value": first_value, "applied": 1},  # type: ignore[index]
                                              {"value": second_value, "applied": 2}]
    assert result == {"values": [first_value, second_value]}
    events = _events(dev_server, "parity-state-updates")
    # The HTTP inventory of ServerParity state-updates (durable-workflow/server tests/Fixtures/ServerParity).
    # After each update the dev server replays the run once more and the published worker re-emits its
    # blocked wait, which the dev server records as a fresh ConditionWaitOpened; the real server's
    # inventory has none of those re-openings, so they are left out of the comparison (known difference).
    kinds = _kinds(events)
    first_wait = kinds.index("ConditionWaitOpened")
    compared = [k for i, k in enumerate(kinds) if k != "ConditionWaitOpened" or i == first_wait]
    assert compared == [
        "StartAccepted", "WorkflowStarted", "ConditionWaitOpened", "UpdateAccepted", "UpdateApplied",
        "UpdateCompleted", "MessageCursorAdvanced", "UpdateAccepted", "UpdateApplied", "UpdateCompleted",
        "MessageCursorAdvanced", "SignalReceived", "MessageCursorAdvanced", "SignalApplied",
        "ConditionWaitSatisfied", "WorkflowCompleted"]
    cursor = [e["payload"]["new_position"] for e in events if e["event_type"] == "MessageCursorAdvanced"]
    assert cursor == [1, 2, 3]


def test_task_queues_search_attributes_export_and_maintenance_with_the_sdk(dev_server: DevServer) -> None:
    from durable_workflow.history_bundle_verify import verify_bundle

    async def body(client: Client, worker: Worker) -> Any:
        handle = await client.start_workflow(workflow_type="interop.cp.echo", task_queue="q-ops",
                                             workflow_id="interop-ops-1", input=[{"text": "λ", "n": BIG}])
        await client.get_result(handle, timeout=20)
        queues = await client.list_task_queues()
        described = await client.describe_task_queue("q-ops")
        rollout = await client.list_task_queue_build_ids("q-ops")
        drained = await client.drain_task_queue_build_id("q-ops", "build-x")
        promoted = await client.promote_task_queue_build_id("q-ops", "build-x")
        resumed = await client.resume_task_queue_build_id("q-ops", "build-x")
        await client.create_search_attribute("OrderStatus", "keyword")
        attributes = await client.list_search_attributes()
        await client.delete_search_attribute("OrderStatus")
        workers = await client.list_workers(task_queue="q-ops")
        bundle = await client.export_history("interop-ops-1", handle.run_id or "")
        archived = await client.archive_workflow("interop-ops-1", reason="retention policy cleanup")
        return (queues, described, rollout, drained, promoted, resumed, attributes, workers, bundle, archived)

    (queues, described, rollout, drained, promoted, resumed, attributes, workers, bundle, archived) = run(
        with_worker(dev_server.url, "q-ops", body, workflows=[Echo]))
    assert "q-ops" in [q.name for q in queues.task_queues]
    assert described.name == "q-ops" and described.admission is not None
    assert described.pollers is not None and len(described.pollers) == 1  # the SDK worker, still registered
    assert [c.rollout_status for c in rollout.build_ids] == ["active"]
    assert (drained.drain_intent, promoted.drain_intent, promoted.new_start_selected, resumed.drain_intent) == (
        "draining", "active", True, "active")
    assert attributes.custom_attributes == {"OrderStatus": "keyword"}
    assert attributes.system_attributes["WorkflowType"] == "keyword"
    assert len(workers.workers) == 1
    assert verify_bundle(bundle)["status"] == "ok"
    assert (archived.outcome, archived.command_status) == ("archived", "accepted")
