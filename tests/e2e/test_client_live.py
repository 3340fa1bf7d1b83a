"""Every Client route over real sockets against the embedded dev server.

The worker protocol is driven by hand here (no ``Worker``), so each call's request and the
server's answer are visible in the test: register, poll, complete, fail, heartbeat, history,
query tasks, standalone activities and both deregistration forms.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Dict, List, Optional

import pytest

from sync_worker import errors, payloads
from sync_worker.client import Client

QUEUE = "client-live"


def _register(client: Client, worker_id: str, *, workflows: List[str], activities: List[str]) -> Dict[str, Any]:
    return client.register_worker({
        "worker_id": worker_id, "task_queue": QUEUE, "runtime": "python", "sdk_version": "sync-worker-test/0",
        "supported_workflow_types": workflows, "supported_activity_types": activities,
        "capability_manifest": {}, "capabilities": ["query_tasks"],
        "max_concurrent_workflow_tasks": 1, "max_concurrent_activity_tasks": 1,
    })


def _poll_workflow(client: Client, worker_id: str, timeout_seconds: int = 5) -> Dict[str, Any]:
    task = client.poll_workflow_task(worker_id=worker_id, task_queue=QUEUE,
                                     poll_request_id=f"wf-poll-{uuid.uuid4().hex}", timeout_seconds=timeout_seconds)
    assert task is not None, "expected a workflow task"
    return task


def _poll_activity(client: Client, worker_id: str) -> Dict[str, Any]:
    task = client.poll_activity_task(worker_id=worker_id, task_queue=QUEUE,
                                     poll_request_id=f"activity-poll-{uuid.uuid4().hex}", timeout_seconds=5)
    assert task is not None, "expected an activity task"
    return task


def _event_types(client: Client, workflow_id: str, run_id: str) -> List[str]:
    return [event["event_type"] for event in client.iter_history(workflow_id, run_id)]


@pytest.fixture
def client(dev_server: Any) -> Client:
    return Client(dev_server.url, transport_retries=2)


def test_discovery_routes(client: Client) -> None:
    assert client.health()["status"] == "serving"
    assert isinstance(client.ready(), dict)
    info = client.validate_worker_compatibility()
    assert info["worker_protocol"]["version"] == "1.20"
    assert client.server_capabilities()["query_tasks"] is True
    assert client.failure_report_limit() <= 1_048_576


def test_workflow_with_activity_driven_by_hand(client: Client) -> None:
    worker_id = f"w-{uuid.uuid4().hex[:8]}"
    ack = _register(client, worker_id, workflows=["hand.greeter"], activities=["hand.greet"])
    assert ack["registered"] is True and len(ack["registration_token"]) == 32
    assert client.heartbeat_worker({"worker_id": worker_id}).get("heartbeat_interval_seconds")

    handle = client.start_workflow("hand.greeter", "ada", 9007199254740993, task_queue=QUEUE)
    task = _poll_workflow(client, worker_id)
    assert payloads.decode_arguments(task["arguments"], codec=task.get("payload_codec")) == ["ada", 9007199254740993]
    attempt = task["workflow_task_attempt"]
    renewed = client.heartbeat_workflow_task(task["task_id"], lease_owner=worker_id, workflow_task_attempt=attempt)
    assert renewed.get("renewed") is True
    client.complete_workflow_task(task["task_id"], lease_owner=worker_id, workflow_task_attempt=attempt, commands=[{
        "type": "schedule_activity", "activity_type": "hand.greet", "queue": QUEUE,
        "arguments": payloads.envelope(["ada"]),
    }])

    activity = _poll_activity(client, worker_id)
    assert payloads.decode_arguments(activity["arguments"], codec=activity.get("payload_codec")) == ["ada"]
    beat = client.heartbeat_activity_task(activity["task_id"], activity_attempt_id=activity["activity_attempt_id"],
                                          lease_owner=worker_id, details={"pct": 50})
    assert beat.get("cancel_requested") is False
    client.complete_activity_task(activity["task_id"], activity_attempt_id=activity["activity_attempt_id"],
                                  lease_owner=worker_id, result={"greeting": "hello ada"})

    task = _poll_workflow(client, worker_id)
    types = [event["event_type"] for event in task["history_events"]]
    assert "ActivityCompleted" in types
    client.complete_workflow_task(task["task_id"], lease_owner=worker_id,
                                  workflow_task_attempt=task["workflow_task_attempt"],
                                  commands=[{"type": "complete_workflow", "result": payloads.envelope("done λ")}])
    assert handle.result(timeout=10) == "done λ"
    described = client.describe_workflow(handle.workflow_id)
    assert described.status == "completed" and described.run_id == handle.run_id
    assert [run["run_id"] for run in client.list_runs(handle.workflow_id)] == [handle.run_id]
    assert _event_types(client, handle.workflow_id, handle.run_id)[-1] == "WorkflowCompleted"
    listed = client.list_workflows(workflow_type="hand.greeter")
    assert handle.workflow_id in [w.workflow_id for w in listed.workflows]
    assert worker_id in [w.get("worker_id") for w in client.list_workers(task_queue=QUEUE).get("workers", [])]
    assert client.describe_worker(worker_id).get("worker_id") == worker_id


def test_stale_task_calls_are_typed_refusals(client: Client) -> None:
    worker_id = f"w-{uuid.uuid4().hex[:8]}"
    _register(client, worker_id, workflows=["hand.stale"], activities=[])
    client.start_workflow("hand.stale", task_queue=QUEUE)
    task = _poll_workflow(client, worker_id)
    with pytest.raises(errors.ServerError) as caught:
        client.complete_workflow_task(task["task_id"], lease_owner=worker_id,
                                      workflow_task_attempt=task["workflow_task_attempt"] + 7,
                                      commands=[{"type": "complete_workflow", "result": payloads.envelope(None)}])
    assert caught.value.status == 409
    with pytest.raises(errors.NotFound):
        client.fail_activity_task("no-such-task", activity_attempt_id="x", lease_owner=worker_id,
                                  failure={"message": "m"})


def test_fail_workflow_task_then_retry_and_history_paging(client: Client) -> None:
    worker_id = f"w-{uuid.uuid4().hex[:8]}"
    _register(client, worker_id, workflows=["hand.retry"], activities=[])
    handle = client.start_workflow("hand.retry", task_queue=QUEUE)
    task = _poll_workflow(client, worker_id)
    client.fail_workflow_task(task["task_id"], lease_owner=worker_id,
                              workflow_task_attempt=task["workflow_task_attempt"],
                              failure={"message": "boom " * 100_000, "type": "RuntimeError"})
    retried = _poll_workflow(client, worker_id, timeout_seconds=10)
    assert retried["workflow_task_attempt"] > task["workflow_task_attempt"]
    token: Optional[str] = retried.get("next_history_page_token")
    if token:
        page = client.workflow_task_history(retried["task_id"], lease_owner=worker_id,
                                            workflow_task_attempt=retried["workflow_task_attempt"],
                                            next_history_page_token=token)
        assert "history_events" in page
    client.complete_workflow_task(retried["task_id"], lease_owner=worker_id,
                                  workflow_task_attempt=retried["workflow_task_attempt"],
                                  commands=[{"type": "complete_workflow", "result": payloads.envelope(1)}])
    assert handle.result(timeout=10) == 1


def test_signal_query_task_update_cancel_terminate(client: Client) -> None:
    worker_id = f"w-{uuid.uuid4().hex[:8]}"
    _register(client, worker_id, workflows=["hand.waiter"], activities=[])
    handle = client.start_workflow("hand.waiter", task_queue=QUEUE)
    task = _poll_workflow(client, worker_id)
    client.complete_workflow_task(task["task_id"], lease_owner=worker_id,
                                  workflow_task_attempt=task["workflow_task_attempt"],
                                  commands=[{"type": "open_condition_wait", "condition_key": "go"}])
    receipt = handle.signal("go", [{"n": 1}], request_id="sig-1")
    assert receipt["request_id"] == "sig-1"

    answers: Dict[str, Any] = {}

    def ask() -> None:
        try:
            answer = client.query_workflow(handle.workflow_id, "state", args=[{"big": 9007199254740993}])
            answers["value"] = answer["result"]
        except Exception as exc:
            answers["error"] = exc

    asker = threading.Thread(target=ask)
    asker.start()
    query = client.poll_query_task(worker_id=worker_id, task_queue=QUEUE, poll_request_id="query-poll-1",
                                   timeout_seconds=5)
    assert query is not None and query["query_name"] == "state"
    args = payloads.decode_arguments(query["query_arguments"], codec=query.get("payload_codec"))
    client.complete_query_task(query["query_task_id"], lease_owner=worker_id,
                               query_task_attempt=query["query_task_attempt"], result={"echo": args})
    asker.join(10)
    assert answers == {"value": {"echo": [{"big": 9007199254740993}]}}

    failing: Dict[str, Any] = {}
    asker = threading.Thread(target=lambda: failing.setdefault("error", _expect_query_failure(client, handle)))
    asker.start()
    query = client.poll_query_task(worker_id=worker_id, task_queue=QUEUE, poll_request_id="query-poll-2",
                                   timeout_seconds=5)
    assert query is not None
    client.fail_query_task(query["query_task_id"], lease_owner=worker_id,
                           query_task_attempt=query["query_task_attempt"],
                           failure={"message": "no such query", "reason": "rejected_unknown_query"})
    asker.join(10)
    assert isinstance(failing["error"], errors.QueryFailed)

    client.cancel_workflow(handle.workflow_id, reason="done here")
    with pytest.raises(errors.WorkflowCancelled):
        handle.result(timeout=10)
    with pytest.raises(errors.ServerError) as caught:
        client.cancel_workflow(handle.workflow_id)
    assert caught.value.reason() == "run_not_active"

    other = client.start_workflow("hand.waiter", task_queue=QUEUE)
    client.terminate_workflow(other.workflow_id, reason="operator")
    with pytest.raises(errors.WorkflowTerminated):
        other.result(timeout=10)


def _expect_query_failure(client: Client, handle: Any) -> BaseException:
    try:
        client.query_workflow(handle.workflow_id, "missing")
    except errors.DurableWorkflowError as exc:
        return exc
    raise AssertionError("query should have failed")


def test_standalone_activity_round_trip(client: Client) -> None:
    worker_id = f"w-{uuid.uuid4().hex[:8]}"
    _register(client, worker_id, workflows=[], activities=["hand.add"])
    receipt = client.start_activity("hand.add", 2, 3, task_queue=QUEUE, retry_policy={"max_attempts": 1})
    task = _poll_activity(client, worker_id)
    assert payloads.decode_arguments(task["arguments"], codec=task.get("payload_codec")) == [2, 3]
    client.complete_activity_task(task["task_id"], activity_attempt_id=task["activity_attempt_id"],
                                  lease_owner=worker_id, result=5)
    assert client.get_activity_result(receipt["activity_id"], timeout=10) == 5
    assert client.describe_activity(receipt["activity_id"])["status"] == "completed"

    failed = client.start_activity("hand.add", 1, task_queue=QUEUE, retry_policy={"max_attempts": 1})
    task = _poll_activity(client, worker_id)
    client.fail_activity_task(task["task_id"], activity_attempt_id=task["activity_attempt_id"], lease_owner=worker_id,
                              failure={"message": "nope", "type": "ValueError", "non_retryable": True})
    with pytest.raises(errors.WorkflowFailed):
        client.get_activity_result(failed["activity_id"], timeout=10)
    assert client.list_activities(status="completed").get("activities")


def test_deregistration_fenced_and_legacy(client: Client) -> None:
    fenced = f"w-{uuid.uuid4().hex[:8]}"
    token = _register(client, fenced, workflows=[], activities=["x"])["registration_token"]
    receipt = client.deregister_worker_fenced(fenced, token, timeout=5)
    assert receipt["outcome"] == "deregistered"
    assert client.deregister_worker_fenced(fenced, token, timeout=5) == receipt  # replay-safe

    legacy = f"w-{uuid.uuid4().hex[:8]}"
    _register(client, legacy, workflows=[], activities=["x"])
    assert client.deregister_worker_legacy(legacy, timeout=5)["outcome"] == "deregistered"
    assert client.deregister_worker_legacy(legacy, timeout=5)["outcome"] == "already_deregistered"
