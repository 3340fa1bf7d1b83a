"""Client import swap, for real: one operator script written against ``durable_workflow.sync.Client``
(``tests/interop/_sdk_sync_script.py``: every method of the facade and of its handles) runs against
the dev server as it is on the published SDK, and on our Client with only its import line replaced.

Both runs get a fresh dev server with the same workflows and activities served by our Worker; the
records of what every call returned (or which error, by status and reason) must be the same, and
the routes the dev server serves must have succeeded.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from sync_worker import activity, workflow
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.worker import Worker
from tests._sdk_missing import SDK_MISSING
from tests.e2e._worker_support import RunningWorker
from tests.interop import _sdk_sync_script as sdk_script

pytest.importorskip("durable_workflow.sync", reason=SDK_MISSING)

SDK_IMPORT = "from durable_workflow.sync import Client, ScheduleAction, ScheduleSpec"
OUR_IMPORT = "from sync_worker.client import Client, ScheduleAction, ScheduleSpec"


@workflow.defn(name="script.order")
class ScriptOrder:
    def __init__(self) -> None:
        self.approvals: List[str] = []
        self.note = ""

    @workflow.signal("approve")
    def approve(self, who: str) -> None:
        self.approvals.append(who)

    @workflow.update("set_note")
    def set_note(self, note: str) -> str:
        self.note = note
        return f"noted {note}"

    @workflow.query("stage")
    def stage(self) -> str:
        return "approved" if len(self.approvals) >= 2 else "waiting"

    def run(self, ctx: Any, order: Dict[str, Any]) -> Any:
        yield ctx.wait_condition(lambda: len(self.approvals) >= 2)
        return {"order": order, "approved_by": self.approvals, "note": self.note}


@workflow.defn(name="script.fail")
class ScriptFail:
    def run(self, ctx: Any, message: str) -> Any:
        raise ValueError(message)
        yield  # pragma: no cover - a generator, as workflow code is


@workflow.defn(name="script.wait")
class ScriptWait:
    def run(self, ctx: Any, *args: Any) -> Any:
        yield ctx.wait_condition(lambda: False)


@activity.defn(name="script.double")
def double(value: int) -> int:
    return value * 2


@activity.defn(name="script.explode")
def explode() -> None:
    raise RuntimeError("kaboom")


def _swapped_script() -> types.ModuleType:
    source = Path(sdk_script.__file__ or "").read_text(encoding="utf-8")
    assert source.count(SDK_IMPORT) == 1
    name = f"{sdk_script.__name__}__sync_worker"
    module = types.ModuleType(name)
    module.__file__ = sdk_script.__file__
    sys.modules[name] = module
    exec(compile(source.replace(SDK_IMPORT, OUR_IMPORT), f"{sdk_script.__file__} (import swapped)", "exec"),
         module.__dict__)
    return module


def _drive(script: types.ModuleType) -> List[Tuple[Any, ...]]:
    queue = "swap-queue"  # each run has its own dev server, so the records compare
    with DevServer(port=0, db=":memory:", workflow_task_lease_seconds=30, query_timeout_seconds=10) as server:
        client = Client(server.url)
        worker = Worker(client, task_queue=queue, workflows=[ScriptOrder, ScriptFail, ScriptWait],
                        activities=[double, explode], poll_timeout=2.0, shutdown_timeout=10.0)
        try:
            with RunningWorker(worker):
                record: List[Tuple[Any, ...]] = script.run(server.url, queue, "swap")
        finally:
            client.close()
    return record


@pytest.fixture(scope="module")
def records() -> Dict[str, List[Tuple[Any, ...]]]:
    swapped = _swapped_script()
    try:
        return {"sdk": _drive(sdk_script), "ours": _drive(swapped)}
    finally:
        sys.modules.pop(swapped.__name__, None)


def test_the_script_calls_every_method_of_the_published_facade(records: Dict[str, List[Tuple[Any, ...]]]) -> None:
    import inspect

    import durable_workflow.sync as facade

    source = Path(sdk_script.__file__ or "").read_text(encoding="utf-8")
    steps = {entry[0].split(" ")[0] for entry in records["ours"]}
    for cls, label in ((facade.Client, "client"), (facade.SyncWorkflowHandle, "handle"),
                       (facade.SyncScheduleHandle, "schedule"), (facade.SyncStandaloneActivityHandle, "activity")):
        for name, member in vars(cls).items():
            if name.startswith("_") or not inspect.isfunction(member) or name == "close":
                continue
            called = (name in steps if label == "client" else f"{label}.{name}" in steps) or \
                f"client.{name}(" in source
            assert called, f"{cls.__name__}.{name} is not exercised by the script"


def test_same_record_on_the_published_sdk_and_on_ours(records: Dict[str, List[Tuple[Any, ...]]]) -> None:
    sdk, ours = records["sdk"], records["ours"]
    assert [entry[0] for entry in ours] == [entry[0] for entry in sdk]
    different = [(s, o) for s, o in zip(sdk, ours) if s != o]
    assert different == []


def test_the_served_routes_succeeded(records: Dict[str, List[Tuple[Any, ...]]]) -> None:
    got = sdk_script.record_as_dict(records["ours"])
    order = {"sku": "A-1", "qty": 2}
    final = {"order": order, "approved_by": ["grace", "ada"], "note": "second"}
    assert got["health"] == ("ok", "serving") or got["health"][0] == "ok"
    assert got["start_workflow"] == ("ok", ("swap-order", "script.order", True))
    assert got["query_workflow"] == ("ok", "waiting")
    assert got["update_workflow"] == ("ok", "noted first")
    assert got["handle.update"] == ("ok", "noted second")
    assert got["handle.result"] == got["get_result"] == ("ok", final)
    assert got["describe_workflow"] == ("ok", ("swap-order", "script.order", "completed", [order], final,
                                               {"source": "script"}))
    assert got["list_workflow_runs"] == ("ok", ("swap-order", 1, ["completed"]))
    assert got["get_history"] == ("ok", ["StartAccepted", "WorkflowCompleted"])
    assert got["get_result (failed)"][:2] == ("error", "WorkflowFailed")
    assert got["cancel_workflow -> result"][:2] == ("error", "WorkflowCancelled")
    assert got["terminate_workflow -> result"][:2] == ("error", "WorkflowTerminated")
    assert got["activity.result"] == got["get_activity_result"] == ("ok", 42)
    assert got["describe_activity"] == ("ok", ("swap-act", "script.double", "completed", 42))
    assert got["activity.result (failed)"][:2] == ("error", "WorkflowFailed")
    for name in ("create_namespace", "describe_namespace", "update_namespace", "list_namespaces",
                 "delete_namespace"):
        assert got[name][0] == "ok", (name, got[name])



# route family -> (a probe request, the script's steps of that family that must succeed once it is served)
FAMILIES: Dict[str, Tuple[Tuple[str, str], List[str]]] = {
    "task queues": (("GET", "/task-queues"), [
        "list_task_queues", "describe_task_queue", "list_task_queue_build_ids", "drain_task_queue_build_id",
        "promote_task_queue_build_id", "resume_task_queue_build_id"]),
    "schedules": (("GET", "/schedules"), [
        "create_schedule", "describe_schedule", "list_schedules", "update_schedule", "pause_schedule",
        "resume_schedule", "trigger_schedule", "backfill_schedule", "schedule.describe", "schedule.update",
        "schedule.pause", "schedule.resume", "schedule.trigger", "schedule.backfill", "schedule.delete"]),
    "history export": (("GET", "/workflows/probe/runs/probe/history/export"), [
        "export_history", "handle.export_history"]),
    "archive": (("POST", "/workflows/probe/archive"), ["archive_workflow"]),
    "repair": (("POST", "/workflows/probe/repair"), ["repair_workflow", "handle.repair"]),
}


def _served(method: str, path: str) -> bool:
    from sync_worker import errors

    with DevServer(port=0, db=":memory:") as server, Client(server.url) as client:
        try:
            client.request(method, path, body={} if method == "POST" else None)
        except errors.ServerError as exc:
            return exc.reason() != "route_not_found"
    return True


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_route_family_works_once_the_dev_server_serves_it(
        family: str, records: Dict[str, List[Tuple[Any, ...]]]) -> None:
    (method, path), steps = FAMILIES[family]
    got = sdk_script.record_as_dict(records["ours"])
    if _served(method, path):
        failed = {step: got[step] for step in steps if got[step][0] != "ok"}
        assert failed == {}
    else:  # refused as the contract says, by both clients alike (the record comparison above)
        assert all(got[step][0] == "error" for step in steps)
