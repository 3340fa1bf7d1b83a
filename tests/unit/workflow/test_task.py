"""The runtime-facing entry points: workflow tasks, update tasks, query tasks, registration data."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from sync_worker import payloads, workflow
from sync_worker.errors import DuplicateRegistrationError, InvalidWorkflowDefinition
from sync_worker.workflow import (
    WorkflowRegistry,
    execute_query_task,
    execute_workflow_task,
    workflow_command_contract,
    workflow_definition_fingerprint,
)
from tests._sdk_missing import SDK_MISSING

from ._helpers import activity_done, blob, ev, started


@workflow.defn(name="t.orders")
class Orders:
    def __init__(self) -> None:
        self.status = "new"
        self.notes: List[str] = []

    @workflow.signal("note")
    def note(self, text: str) -> None:
        self.notes.append(text)

    @workflow.query("status")
    def get_status(self, verbose: bool = False) -> Any:
        return {"status": self.status, "notes": self.notes} if verbose else self.status

    @workflow.query("broken")
    def broken(self) -> Any:
        raise RuntimeError("cannot answer")

    @workflow.query("bytes")
    def raw(self) -> Any:
        return b"\x00"

    @workflow.query("async")
    async def async_status(self) -> str:
        return self.status

    @workflow.update("rename")
    def rename(self, status: str) -> Dict[str, Any]:
        if not status:
            raise ValueError("status required")
        self.status = status
        return {"status": status}

    @rename.validator
    def check_rename(self, status: str) -> None:
        pass

    def run(self, ctx: Any, order_id: str, qty: int = 1) -> Any:
        self.status = "charging"
        receipt = yield ctx.schedule_activity("charge", [order_id, qty])
        self.status = "charged"
        yield ctx.wait_condition(lambda: self.status == "done", key="done")
        return receipt


REGISTRY = WorkflowRegistry([Orders])


def task(**extra: Any) -> Dict[str, Any]:
    base = {"task_id": "task-1", "workflow_type": "t.orders", "workflow_id": "wf-1", "run_id": "run-1",
            "payload_codec": "avro", "arguments": payloads.envelope(["o-1", 2])}
    base.update(extra)
    return base


def test_first_task_schedules_on_the_worker_queue() -> None:
    outcome = execute_workflow_task(REGISTRY, task(), [started()], task_queue="orders-q")
    assert outcome.failure is None
    assert [(c["type"], c["queue"]) for c in outcome.commands] == [("schedule_activity", "orders-q")]
    assert payloads.decode_envelope(outcome.commands[0]["arguments"]) == ["o-1", 2]


def test_waiting_for_history_is_an_empty_command_list_without_failure() -> None:
    history = [started(), ev("ActivityScheduled", sequence=1, activity_type="charge")]
    outcome = execute_workflow_task(REGISTRY, task(), history, task_queue="q")
    assert outcome.commands == [] and outcome.failure is None


def test_unknown_workflow_type() -> None:
    outcome = execute_workflow_task(REGISTRY, task(workflow_type="nope"), [started()], task_queue="q")
    assert outcome.commands == [] and outcome.failure == {"message": "no workflow registered for type 'nope'"}


@pytest.mark.parametrize("codec", [None, "json"])
def test_bad_task_codec_fails_the_task(codec: Optional[str]) -> None:
    outcome = execute_workflow_task(REGISTRY, task(payload_codec=codec), [started()], task_queue="q")
    assert outcome.commands == [] and outcome.failure is not None
    assert outcome.failure["message"].startswith(f"cannot decode workflow start input with codec {codec!r}")
    assert "unsupported_payload_codec" in outcome.failure["message"] and "stack_trace" in outcome.failure


def test_undecodable_start_input_fails_the_task() -> None:
    outcome = execute_workflow_task(REGISTRY, task(arguments="bm90LWF2cm8="), [started()], task_queue="q")
    assert outcome.failure is not None and outcome.failure["message"].startswith("cannot decode workflow start input")


def test_arguments_mismatch_fails_the_task_with_reason() -> None:
    outcome = execute_workflow_task(REGISTRY, task(arguments=payloads.envelope([])), [started()], task_queue="q")
    assert outcome.failure is not None
    assert outcome.failure["type"] == "WorkflowEntryArgumentsMismatchError"
    assert outcome.failure["reason"] == "workflow_entry_arguments_mismatch"
    assert outcome.failure["message"].startswith("replay failed: workflow_entry_arguments_mismatch")


def test_changed_workflow_code_fails_the_task_not_the_workflow() -> None:
    # History recorded by an older build that scheduled "authorize" first.
    history = [started(), *activity_done(1, "authorize", "ok")]
    outcome = execute_workflow_task(REGISTRY, task(), history, task_queue="q")
    assert outcome.commands == []
    assert outcome.failure is not None and outcome.failure["type"] == "NonDeterministicReplayError"
    assert outcome.failure["message"] == (
        "replay failed: workflow history at workflow sequence 1 recorded ['ActivityScheduled', 'ActivityCompleted'], "
        "but the current workflow yielded activity:charge. Recorded activity_type 'authorize', but current workflow "
        "scheduled 'charge'. Keep yielded workflow steps stable across deployments or run this workflow on a "
        "compatible build.")


def test_invalid_command_options_fail_the_task() -> None:
    @workflow.defn(name="t.badtimeouts")
    class BadTimeouts:
        def run(self, ctx: Any) -> Any:
            yield ctx.schedule_activity("a", [], heartbeat_timeout=50, start_to_close_timeout=10)

    outcome = execute_workflow_task(WorkflowRegistry([BadTimeouts]), task(workflow_type="t.badtimeouts",
                                                                          arguments=None), [started()], task_queue="q")
    assert outcome.failure is not None
    assert outcome.failure["message"].startswith("unhandled workflow task execution error: heartbeat_timeout")


def test_cancellation_policies_need_cooperative_cancellation() -> None:
    @workflow.defn(name="t.policy")
    class Policy:
        def run(self, ctx: Any) -> Any:
            yield ctx.schedule_activity("a", [], cancellation_policy="abandon", schedule_to_close_timeout=5)

    outcome = execute_workflow_task(WorkflowRegistry([Policy]), task(workflow_type="t.policy", arguments=None),
                                    [started()], task_queue="q")
    assert outcome.failure is not None and outcome.failure["type"] == "RuntimeCapabilityUnsupported"
    assert "activity_cancellation_policy_not_supported" in outcome.failure["message"]


def _update_history(update_id: str, name: str, arguments: Any) -> List[Dict[str, Any]]:
    return [started(), *activity_done(1, "charge", "rcpt"),
            ev("ConditionWaitOpened", sequence=2, condition_wait_id="w2", condition_key="done"),
            ev("UpdateAccepted", update_id=update_id, update_name=name, arguments=blob(arguments))]


def test_update_task_runs_the_handler_and_returns_exactly_one_command() -> None:
    outcome = execute_workflow_task(REGISTRY, task(workflow_update_id="u-1"),
                                    _update_history("u-1", "rename", ["done"]), task_queue="q")
    assert outcome.failure is None
    assert outcome.commands == [{"type": "complete_update", "update_id": "u-1",
                                 "result": payloads.envelope({"status": "done"})}]


@pytest.mark.parametrize(("name", "arguments", "update_id", "exception_type", "message"), [
    ("rename", [""], "u-1", "ValueError", "update handler failed: status required"),
    ("missing", [], "u-1", "UnknownUpdate", "unknown update 'missing'"),
    ("rename", ["x"], "u-other", "UpdateNotFound", "accepted update 'u-other' was not present in workflow history"),
])
def test_update_task_failures(name: str, arguments: Any, update_id: str, exception_type: str, message: str) -> None:
    outcome = execute_workflow_task(REGISTRY, task(workflow_update_id=update_id),
                                    _update_history("u-1", name, arguments), task_queue="q")
    (command,) = outcome.commands
    assert command["type"] == "fail_update" and command["update_id"] == update_id
    assert command["exception_type"] == exception_type and command["message"] == message
    assert command["non_retryable"] is True


def test_update_task_with_non_deterministic_history_fails_the_task() -> None:
    history = [started(), *activity_done(1, "authorize", "x"), ev("UpdateAccepted", update_id="u", update_name="rename",
                                                                  arguments=blob(["done"]))]
    outcome = execute_workflow_task(REGISTRY, task(workflow_update_id="u"), history, task_queue="q")
    assert outcome.commands == [] and outcome.failure is not None
    assert outcome.failure["message"].startswith("workflow replay failed before update 'u': workflow history")


def query_task(name: str, args: Any = None, **extra: Any) -> Dict[str, Any]:
    base = {"query_task_id": "q-1", "query_task_attempt": 1, "workflow_type": "t.orders", "query_name": name,
            "payload_codec": "avro", "workflow_arguments": payloads.envelope(["o-1"]),
            "history_events": [started(), *activity_done(1, "charge", "rcpt"),
                               ev("SignalReceived", signal_name="note", value=blob(["fragile"]))]}
    if args is not None:
        base["query_arguments"] = payloads.envelope(args)
    base.update(extra)
    return base


def test_query_answers_from_replayed_state() -> None:
    answer = execute_query_task(REGISTRY, query_task("status", [True]))
    assert answer.failure is None
    assert answer.value == {"status": "charged", "notes": ["fragile"]}
    assert answer.result_envelope == payloads.envelope(answer.value)
    assert execute_query_task(REGISTRY, query_task("async")).value == "charged"


def test_query_uses_a_longer_history_export() -> None:
    longer = [started(), *activity_done(1, "charge", "rcpt"), ev("SignalReceived", signal_name="note",
                                                                  value=blob(["a"])),
              ev("SignalReceived", signal_name="note", value=blob(["b"]))]
    answer = execute_query_task(REGISTRY, query_task("status", [True], history_export={"history_events": longer}))
    assert answer.value == {"status": "charged", "notes": ["a", "b"]}


@pytest.mark.parametrize(("overrides", "reason"), [
    ({"query_name": "nope"}, "rejected_unknown_query"),
    ({"query_name": "broken"}, "query_rejected"),
    ({"query_name": "bytes"}, "query_result_encode_failed"),
    ({"payload_codec": "json"}, "query_payload_decode_failed"),
    ({"query_arguments": "bm9wZQ=="}, "query_payload_decode_failed"),
    ({"workflow_type": "ghost"}, "query_workflow_type_not_registered"),
    ({"history_events": [started(), *activity_done(1, "authorize", "x")]}, "query_workflow_state_unavailable"),
])
def test_query_failure_reasons(overrides: Dict[str, Any], reason: str) -> None:
    answer = execute_query_task(REGISTRY, query_task("status", **overrides))
    assert answer.value is None and answer.failure is not None
    assert answer.failure["reason"] == reason and answer.failure["message"]


def test_registry_rules() -> None:
    assert REGISTRY.get("t.orders") is Orders and "t.orders" in REGISTRY and len(REGISTRY) == 1
    registry = WorkflowRegistry([Orders, Orders])
    assert registry.names() == ["t.orders"]

    @workflow.defn(name="t.orders")
    class Impostor:
        def run(self, ctx: Any) -> Any:
            return None

    with pytest.raises(DuplicateRegistrationError):
        registry.register(Impostor)

    class Undecorated:
        def run(self, ctx: Any) -> Any:
            return None

    with pytest.raises(InvalidWorkflowDefinition):
        registry.register(Undecorated)


def test_duplicate_handler_names_are_refused() -> None:
    with pytest.raises(DuplicateRegistrationError):
        @workflow.defn(name="t.dupe")
        class Dupe:
            @workflow.signal("go")
            def one(self) -> None:
                pass

            @workflow.signal("go")
            def two(self) -> None:
                pass

            def run(self, ctx: Any) -> Any:
                return None


def test_command_contract_and_fingerprint() -> None:
    contract = workflow_command_contract(Orders)
    assert contract["queries"] == ["async", "broken", "bytes", "status"]
    assert contract["signals"] == ["note"] and contract["updates"] == ["rename"]
    assert contract["update_validators"] == ["rename"]
    status = next(c for c in contract["query_contracts"] if c["name"] == "status")
    assert status["parameters"] == [{"name": "verbose", "position": 0, "required": False, "variadic": False,
                                     "default_available": True, "default": False, "type": "bool",
                                     "allows_null": False}]
    assert contract["signal_contracts"][0]["parameters"][0]["type"] == "string"
    fingerprint = workflow_definition_fingerprint(Orders)
    assert fingerprint.startswith("sha256:") and len(fingerprint) == 71
    assert fingerprint == workflow_definition_fingerprint(Orders)
    assert fingerprint != workflow_definition_fingerprint(type("Other", (Orders,), {}))


def test_registration_data_matches_the_published_sdk() -> None:
    sdk_worker = pytest.importorskip("durable_workflow.worker", reason=SDK_MISSING)
    assert workflow_command_contract(Orders) == sdk_worker._workflow_command_contract(Orders)
    assert workflow_definition_fingerprint(Orders) == sdk_worker._workflow_definition_fingerprint(Orders)
