"""Update validators, decided from a replayed state (``sync_worker.workflow.update_validation``), and
the worker's registration rule: it refuses a server that cannot validate before accepting."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from sync_worker import workflow
from sync_worker.errors import InvalidArgument, UpdateRejected
from sync_worker.worker.update_validation import server_supports_validation
from sync_worker.workflow import workflow_command_contract
from sync_worker.workflow.update_validation import validate_update
from tests.unit.workflow._helpers import ev, started


@workflow.defn(name="unit.validators.counter")
class Counter:
    def __init__(self) -> None:
        self.total = 0
        self.validated: List[int] = []

    @workflow.signal("bump")
    def bump(self, by: int) -> None:
        self.total += by

    @workflow.update("add")
    def add(self, by: int) -> int:
        raise AssertionError("a validation never runs the handler")

    @add.validator
    def check_add(self, by: int) -> None:
        self.validated.append(by)
        if self.total + by > 10:
            raise ValueError(f"total would be {self.total + by}")

    @workflow.update("set")
    def set(self, value: int) -> int:
        return value

    @workflow.update_validator("set")
    async def check_set(self, value: int) -> bool:
        return value >= 0

    @workflow.update("typed")
    def typed(self) -> None:
        pass

    @typed.validator
    def check_typed(self) -> None:
        raise UpdateRejected("nope", exception_type="Policy", validation_errors={"who": ["not allowed"]})

    @workflow.update("argued")
    def argued(self) -> None:
        pass

    @argued.validator
    def check_argued(self) -> None:
        raise InvalidArgument(422, {"message": "bad", "errors": {"field": ["wrong"]}})

    @workflow.update("no_validator")
    def no_validator(self) -> None:
        pass

    def run(self, ctx: Any) -> Any:
        yield ctx.wait_condition(lambda: self.total >= 100)
        return self.total


def _history(bumps: List[int]) -> List[Dict[str, Any]]:
    from sync_worker import payloads

    events = [started(), ev("ConditionWaitOpened", sequence=1, condition_wait_id="w1")]
    events += [ev("SignalReceived", signal_name="bump", value=payloads.envelope([by])) for by in bumps]
    return events


def test_the_contract_declares_the_validators() -> None:
    assert workflow_command_contract(Counter)["update_validators"] == ["add", "argued", "set", "typed"]


def test_the_validator_sees_the_replayed_state_and_the_handler_never_runs() -> None:
    assert validate_update(Counter, _history([4, 5]), [], "add", [1]).approved
    verdict = validate_update(Counter, _history([4, 5]), [], "add", [2])
    assert not verdict.approved and verdict.reason == "update_validator_rejected"
    assert verdict.message == "total would be 11" and verdict.type == "ValueError"
    assert verdict.failure()["stack_trace"].startswith("Traceback")


def test_false_rejects_and_an_async_validator_that_never_awaits_runs() -> None:
    assert validate_update(Counter, _history([]), [], "set", [3]).approved
    verdict = validate_update(Counter, _history([]), [], "set", [-1])
    assert (verdict.reason, verdict.message, verdict.type) == (
        "update_validator_rejected", "update validator 'set' returned false", "ValueError")


def test_typed_rejections_keep_their_type_and_validation_errors() -> None:
    verdict = validate_update(Counter, _history([]), [], "typed", [])
    assert (verdict.message, verdict.type, verdict.validation_errors) == ("nope", "Policy", {"who": ["not allowed"]})
    verdict = validate_update(Counter, _history([]), [], "argued", [])
    assert verdict.type == "InvalidArgument" and verdict.validation_errors == {"field": ["wrong"]}


@pytest.mark.parametrize("name, message", [
    ("missing", "unknown update 'missing'"),
    ("no_validator", "update validator 'no_validator' is not declared"),
])
def test_what_the_worker_cannot_decide(name: str, message: str) -> None:
    verdict = validate_update(Counter, _history([]), [], name, [])
    assert (verdict.reason, verdict.message, verdict.type) == (
        "update_validation_worker_failed", message, "UpdateValidationFailed")
    broken = [started(), ev("ActivityCompleted", sequence=1, activity_type="x", result="nope")]
    verdict = validate_update(Counter, broken, [], "add", [1])
    assert verdict.reason == "update_validation_worker_failed"
    assert verdict.message.startswith("workflow replay failed before update validation: ")


def test_a_server_without_synchronous_validation_is_refused() -> None:
    from sync_worker.devserver.update_validation import server_semantics

    assert server_supports_validation({"update_validation_tasks": True,
                                       "synchronous_update_validation": server_semantics()})
    assert not server_supports_validation({"update_validation_tasks": True})
    semantics = dict(server_semantics(), task_poll={"strategy": "separate"})
    assert not server_supports_validation({"update_validation_tasks": True, "synchronous_update_validation": semantics})
