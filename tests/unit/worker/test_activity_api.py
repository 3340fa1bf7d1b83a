from __future__ import annotations

import threading
from typing import Any, Dict, List

import pytest

from sync_worker import activity
from sync_worker.errors import (
    ActivityCancelled,
    ActivityLeaseAuthorityLost,
    InvalidWorkflowDefinition,
    NonRetryableError,
)
from sync_worker.worker.activities import failure_from_exception


class HeartbeatClient:
    """Records heartbeat calls and answers with scripted responses."""

    def __init__(self, responses: List[Dict[str, Any]]) -> None:
        self.responses = list(responses)
        self.calls: List[Dict[str, Any]] = []

    def heartbeat_activity_task(self, task_id: str, **kwargs: Any) -> Dict[str, Any]:
        self.calls.append(dict(kwargs, task_id=task_id))
        return self.responses.pop(0) if self.responses else {}


def make_context(client: HeartbeatClient) -> activity.ActivityContext:
    info = activity.ActivityInfo(
        task_id="t1", activity_type="greet", activity_attempt_id="a1", attempt_number=2,
        task_queue="q", worker_id="w1",
        task_metadata={"workflow_id": "wf", "run_id": "", "retry_policy": {"max_attempts": 2}},
    )
    return activity.ActivityContext(info=info, client=client)


def test_defn_names_the_function_and_refuses_async() -> None:
    @activity.defn(name="unit.add")
    def add(a: int, b: int) -> int:
        return a + b

    assert activity.activity_name(add) == "unit.add"
    assert activity.registry()["unit.add"] is add
    with pytest.raises(InvalidWorkflowDefinition, match="async def"):
        @activity.defn(name="unit.async")
        async def nope() -> None:  # pragma: no cover - never called
            return None


def test_context_outside_activity_raises() -> None:
    with pytest.raises(RuntimeError, match="outside of an activity"):
        activity.context()


def test_context_is_per_thread() -> None:
    ctx = make_context(HeartbeatClient([]))
    activity._set_context(ctx)
    seen: List[Any] = []

    def other() -> None:
        try:
            activity.context()
        except RuntimeError as error:
            seen.append(error)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    try:
        assert activity.context() is ctx
        assert len(seen) == 1
    finally:
        activity._set_context(None)


def test_info_fields() -> None:
    info = make_context(HeartbeatClient([])).info
    assert info.workflow_id == "wf" and info.run_id is None
    assert info.retry_info.max_attempts() == 2
    assert info.retry_info.is_last_configured_attempt() is True


def test_heartbeat_sends_identity_and_details() -> None:
    client = HeartbeatClient([{"ok": True}])
    ctx = make_context(client)
    ctx.heartbeat_sync({"pct": 10})
    assert client.calls == [{"task_id": "t1", "activity_attempt_id": "a1", "lease_owner": "w1",
                             "details": {"pct": 10}, "cancel": None}]
    assert not ctx.is_cancelled


def test_cancel_requested_raises_activity_cancelled() -> None:
    ctx = make_context(HeartbeatClient([{"cancel_requested": True, "can_continue": False}]))
    with pytest.raises(ActivityCancelled):
        ctx.heartbeat_sync()
    assert ctx.is_cancelled


def test_authority_loss_is_sticky() -> None:
    client = HeartbeatClient([{"can_continue": False, "reason": "run_closed"}, {}])
    ctx = make_context(client)
    with pytest.raises(ActivityLeaseAuthorityLost) as caught:
        ctx.heartbeat_sync()
    assert caught.value.reason == "run_closed" and caught.value.task_id == "t1"
    with pytest.raises(ActivityLeaseAuthorityLost):
        ctx.heartbeat_sync()
    assert len(client.calls) == 1  # the later heartbeat never reached the server


def test_authority_loss_default_reason() -> None:
    ctx = make_context(HeartbeatClient([{"can_continue": False}]))
    with pytest.raises(ActivityLeaseAuthorityLost) as caught:
        ctx.heartbeat_sync()
    assert caught.value.reason == "activity_cannot_continue"


def test_failure_body_for_retryable_and_non_retryable() -> None:
    class CodedError(Exception):
        code = 42

    try:
        raise CodedError("boom")
    except CodedError as error:
        failure = failure_from_exception(error)
    assert failure["message"] == "boom"
    assert failure["type"] == "CodedError"
    assert failure["class"].endswith("test_activity_api.CodedError") or failure["class"].endswith(
        "CodedError")
    assert failure["code"] == 42
    assert "non_retryable" not in failure
    assert "Traceback" in failure["stack_trace"] and "boom" in failure["stack_trace"]

    failure = failure_from_exception(NonRetryableError("card declined"))
    assert failure["non_retryable"] is True and failure["type"] == "NonRetryableError"

    class BoolCode(Exception):
        code = True

    assert "code" not in failure_from_exception(BoolCode("x"))


def test_a_context_builds_its_info_at_the_first_read() -> None:
    built: List[int] = []

    def factory() -> activity.ActivityInfo:
        built.append(1)
        return activity.ActivityInfo(task_id="t9", activity_type="greet", activity_attempt_id="a9",
                                     attempt_number=1, task_queue="q", worker_id="w1")

    client = HeartbeatClient([{"can_continue": False, "reason": "lease_lost"}])
    ctx = activity.ActivityContext(info_factory=factory, client=client)
    assert built == []
    assert ctx.info.task_id == "t9" and ctx.info is ctx.info and built == [1]
    with pytest.raises(ActivityLeaseAuthorityLost):
        ctx.heartbeat_sync()
    assert client.calls[0]["task_id"] == "t9" and client.calls[0]["activity_attempt_id"] == "a9"
    with pytest.raises(TypeError):
        activity.ActivityContext(client=client)
