"""Each ctx operation's command and its wire shape (protocol §4.5.1)."""

from __future__ import annotations

import math
import uuid
from typing import Any

import pytest

from sync_worker import payloads
from sync_worker.workflow import (
    ActivityRetryPolicy,
    ChildWorkflowRetryPolicy,
    ParentClosePolicy,
    WorkflowContext,
)
from sync_worker.workflow.context import condition_fingerprint
from tests._sdk_missing import SDK_MISSING

from ._helpers import STARTED_AT


def ctx(run_id: str = "run-1") -> WorkflowContext:
    from datetime import datetime

    return WorkflowContext(workflow_id="wf-1", run_id=run_id, start_time=datetime.fromisoformat(STARTED_AT))


def test_schedule_activity_full_shape() -> None:
    command = ctx().schedule_activity(
        "charge", ["card", 3], queue="billing", retry_policy=ActivityRetryPolicy(
            max_attempts=4, initial_interval_seconds=0.5, backoff_coefficient=3, maximum_interval_seconds=4,
            non_retryable_error_types=["Declined", " "]),
        start_to_close_timeout=30, schedule_to_start_timeout=10, schedule_to_close_timeout=60, heartbeat_timeout=5)
    wire = command.to_wire("default-q")
    assert wire == {
        "type": "schedule_activity", "activity_type": "charge", "arguments": payloads.envelope(["card", 3]),
        "queue": "billing",
        "retry_policy": {"max_attempts": 4, "backoff_seconds": [1, 2, 4], "non_retryable_error_types": ["Declined"]},
        "start_to_close_timeout": 30, "schedule_to_start_timeout": 10, "schedule_to_close_timeout": 60,
        "heartbeat_timeout": 5,
    }


def test_schedule_activity_defaults_to_worker_queue_and_passes_raw_retry_dict() -> None:
    wire = ctx().schedule_activity("a", [], retry_policy={"max_attempts": 1}).to_wire("worker-q")
    assert wire["queue"] == "worker-q" and wire["retry_policy"] == {"max_attempts": 1}
    assert payloads.decode_envelope(wire["arguments"]) == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"heartbeat_timeout": 20, "start_to_close_timeout": 10}, "heartbeat_timeout"),
    ({"start_to_close_timeout": 20, "schedule_to_close_timeout": 10}, "start_to_close_timeout"),
    ({"schedule_to_start_timeout": 20, "schedule_to_close_timeout": 10}, "schedule_to_start_timeout"),
    ({"heartbeat_timeout": 0}, ">= 1"),
])
def test_activity_timeout_rules(kwargs: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ctx().schedule_activity("a", [], **kwargs).to_wire("q")


def test_retry_backoff_is_capped_then_rounded_up() -> None:
    policy = ActivityRetryPolicy(max_attempts=5, initial_interval_seconds=1.2, backoff_coefficient=2.0,
                                 maximum_interval_seconds=5)
    assert policy.to_dict()["backoff_seconds"] == [math.ceil(1.2), math.ceil(2.4), 5, 5]
    assert ActivityRetryPolicy(max_attempts=3, backoff_seconds=[7, -1]).to_dict()["backoff_seconds"] == [7, 0]
    with pytest.raises(ValueError):
        ActivityRetryPolicy(max_attempts=0).to_dict()


def test_timers() -> None:
    assert ctx().start_timer(5).to_wire("q") == {"type": "start_timer", "delay_seconds": 5}
    assert ctx().sleep(1.2).to_wire("q") == {"type": "start_timer", "delay_seconds": 2}
    assert ctx().sleep(-3).delay_seconds == 0


def test_child_workflow_shape() -> None:
    command = ctx().start_child_workflow(
        "child", [1], task_queue="kids", parent_close_policy=ParentClosePolicy.TERMINATE,
        retry_policy=ChildWorkflowRetryPolicy(max_attempts=2), execution_timeout_seconds=100, run_timeout_seconds=50)
    assert command.to_wire("q") == {
        "type": "start_child_workflow", "workflow_type": "child", "arguments": payloads.envelope([1]),
        "queue": "kids", "parent_close_policy": "terminate",
        "retry_policy": {"max_attempts": 2, "backoff_seconds": [1], "non_retryable_error_types": []},
        "execution_timeout_seconds": 100, "run_timeout_seconds": 50,
    }
    assert ctx().start_child_workflow("child").to_wire("q") == {
        "type": "start_child_workflow", "workflow_type": "child", "arguments": payloads.envelope([]), "queue": "q"}
    with pytest.raises(ValueError, match="run_timeout_seconds"):
        ctx().start_child_workflow("c", run_timeout_seconds=10, execution_timeout_seconds=5).to_wire("q")
    with pytest.raises(ValueError, match="supported policy"):
        ctx().start_child_workflow("c", parent_close_policy="explode")


def test_side_effect_wire_result_is_a_bare_blob() -> None:
    command = ctx().side_effect(lambda: {"n": 1})
    command.result = {"n": 1}
    assert command.to_wire("q") == {"type": "record_side_effect", "result": payloads.encode({"n": 1})}


def test_version_markers() -> None:
    assert ctx().get_version("c", 1, 3).to_wire("q") == {
        "type": "record_version_marker", "change_id": "c", "version": 3, "min_supported": 1, "max_supported": 3}
    patched = ctx().patched("p")
    assert (patched.version, patched.min_supported, patched.max_supported) == (1, -1, 1)
    assert patched.result_for(1) is True and patched.result_for(-1) is False
    assert ctx().deprecate_patch("p").result_for(1) is None


def test_upserts() -> None:
    assert ctx().upsert_search_attributes({"k": "v"}).to_wire("q") == {
        "type": "upsert_search_attributes", "attributes": {"k": "v"}}
    wire = ctx().upsert_memo({"b": 1, "a": {"z": 1, "y": None}}).to_wire("q")
    assert wire["type"] == "upsert_memo"
    assert list(payloads.decode_envelope(wire["entries"])) == ["a", "b"]
    for bad in ({}, {"12": 1}, {"x" * 65: 1}, {"big": "x" * 20_000}):
        with pytest.raises(ValueError):
            ctx().upsert_memo(bad)


def test_wait_condition_shape_and_fingerprint() -> None:
    def ready() -> bool:
        return True

    command = ctx().wait_condition(ready, key="k", timeout=2.5)
    assert command.to_wire("q") == {"type": "open_condition_wait", "condition_key": "k",
                                    "condition_definition_fingerprint": condition_fingerprint(ready),
                                    "timeout_seconds": 3}
    assert command.condition_definition_fingerprint.startswith("sha256:")
    assert condition_fingerprint(ready) != condition_fingerprint(lambda: True)
    assert ctx().wait_condition(ready).to_wire("q") == {
        "type": "open_condition_wait", "condition_definition_fingerprint": condition_fingerprint(ready)}


def test_continue_as_new_shape() -> None:
    assert ctx().continue_as_new(1, "x", workflow_type="next", task_queue="tq").to_wire("q") == {
        "type": "continue_as_new", "workflow_type": "next", "arguments": payloads.envelope([1, "x"]), "queue": "tq"}
    assert ctx().continue_as_new().to_wire("q") == {
        "type": "continue_as_new", "arguments": payloads.envelope([]), "queue": "q"}


def test_determinism_helpers_match_the_published_sdk() -> None:
    sdk = pytest.importorskip("durable_workflow.workflow", reason=SDK_MISSING)
    from datetime import datetime

    theirs = sdk.WorkflowContext(workflow_id="wf-1", run_id="run-7", current_time=datetime.fromisoformat(STARTED_AT))
    ours = ctx("run-7")
    assert [ours.uuid4() for _ in range(3)] == [theirs.uuid4() for _ in range(3)]
    assert [ours.uuid7() for _ in range(3)] == [theirs.uuid7() for _ in range(3)]
    assert ours.random().random() == theirs.random().random()
    assert ours.now() == theirs.now()
    assert ours.uuid7().version == 7 and isinstance(ours.uuid4(), uuid.UUID)


def test_now_without_a_recorded_start_is_a_replay_error() -> None:
    from sync_worker.errors import NonDeterministicReplayError

    with pytest.raises(NonDeterministicReplayError, match="clock unavailable"):
        WorkflowContext(run_id="r", clock_error="Workflow replay clock unavailable: x").now()
