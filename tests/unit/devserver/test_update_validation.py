"""Synchronous pre-accept update validation on the dev server, over real sockets (raw HTTP).

What ``sync_worker/devserver/update_validation.py`` takes from the server's
``WorkflowUpdateValidationTaskBroker`` / ``ValidatedExternalWorkflowUpdateAdmission`` /
``WorkflowStartService``: the advertisement the published SDK checks, the contract recorded at
start, the multiplexed and standalone polls, approve / reject with their fences, every typed
refusal, and what a rejection records (an ``UpdateRejected`` event, nothing accepted). Our
client's exceptions for each answer are checked too.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Iterator, List, Optional

import pytest
import requests

from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.errors import UpdateRejected, UpdateValidationFailed
from sync_worker.payloads import envelope
from sync_worker.worker.update_validation import server_supports_validation
from tests._sdk_missing import SDK_MISSING
from tests.unit.devserver._raw import Raw

CONTRACT = {"queries": [], "signals": [], "updates": ["add", "plain"], "update_validators": ["add"]}


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer(workflow_task_lease_seconds=30, update_validation_timeout_seconds=1.5) as found:
        yield found


def _register(raw: Raw, worker_id: str = "w1", *, capable: bool = True, contract: Optional[Dict[str, Any]] = None,
              queue: str = "q") -> None:
    raw.ok("POST", "/worker/register", {
        "worker_id": worker_id, "task_queue": queue, "supported_workflow_types": ["t"],
        "capabilities": ["update_validation_tasks"] if capable else [],
        "workflow_command_contracts": {"t": CONTRACT if contract is None else contract}}, plane="worker")


def _update(raw: Raw, workflow_id: str, args: List[Any], request_id: Optional[str],
            name: str = "add") -> requests.Response:
    body: Dict[str, Any] = {"input": envelope(args), "wait_for": "accepted"}
    if request_id is not None:
        body["request_id"] = request_id
    return raw.call("POST", f"/workflows/{workflow_id}/update/{name}", body)


class _Later:
    """An update submitted on another thread (it waits for the verdict)."""

    def __init__(self, raw: Raw, workflow_id: str, args: List[Any], request_id: str) -> None:
        self.response: Optional[requests.Response] = None
        self.thread = threading.Thread(target=self._run, args=(Raw(raw.url), workflow_id, args, request_id))
        self.thread.start()

    def _run(self, raw: Raw, workflow_id: str, args: List[Any], request_id: str) -> None:
        self.response = _update(raw, workflow_id, args, request_id)

    def result(self) -> requests.Response:
        self.thread.join(10)
        assert self.response is not None
        return self.response


def _validation_task(raw: Raw, worker_id: str = "w1", *, standalone: bool = False) -> Dict[str, Any]:
    for _ in range(5):
        if standalone:
            task = raw.poll(worker_id=worker_id, kind="update-validation", timeout=3)
        else:
            task = raw.poll(worker_id=worker_id, timeout=3, task_kinds=["workflow", "update_validation"])
        assert task is not None
        if task["task_kind"] == "update_validation":
            return dict(task)
        # a plain workflow task of the run (an earlier update woke it): nothing new to do
        raw.fail(task, {"message": "Workflow task waiting for scheduled history.",
                        "type": "WorkflowTaskWaitingForHistory"})
    raise AssertionError("no update validation task")


def _answer(raw: Raw, task: Dict[str, Any], action: str, failure: Optional[Dict[str, Any]] = None,
            owner: Optional[str] = None) -> requests.Response:
    body: Dict[str, Any] = {"lease_owner": owner or task["lease_owner"],
                            "update_validation_attempt": task["update_validation_attempt"]}
    if failure is not None:
        body["failure"] = failure
    return raw.call("POST", f"/worker/update-validation-tasks/{task['update_validation_task_id']}/{action}", body,
                    plane="worker")


def _started(raw: Raw, workflow_id: str) -> None:
    raw.start(workflow_id)
    raw.complete(raw.poll(), [{"type": "open_condition_wait", "condition_key": "done"}])


def test_the_advertisement_is_what_the_published_sdk_requires(server: DevServer) -> None:
    info = Raw(server.url).ok("GET", "/cluster/info", plane="worker")
    capabilities = info["worker_protocol"]["server_capabilities"]
    assert server_supports_validation(capabilities)
    sdk_worker = pytest.importorskip("durable_workflow.worker", reason=SDK_MISSING)
    _server_supports_update_validation_tasks = sdk_worker._server_supports_update_validation_tasks

    assert _server_supports_update_validation_tasks(info)


def test_the_start_records_the_registered_contract(server: DevServer) -> None:
    raw = Raw(server.url)
    raw.start("wf-before")
    started = raw.history("wf-before")[1]["payload"]
    assert "declared_updates" not in started  # no worker yet: no durable contract, nothing to validate
    assert _update(raw, "wf-before", ["x", 1], "r0").status_code == 200
    _register(raw)
    raw.start("wf-after")
    started = raw.history("wf-after")[1]["payload"]
    assert started["declared_updates"] == ["add", "plain"] and started["declared_update_validators"] == ["add"]


def test_approve_then_accept_and_reject_records_only_the_rejection(server: DevServer) -> None:
    raw = Raw(server.url)
    _register(raw)
    _started(raw, "wf-1")
    later = _Later(raw, "wf-1", ["pen", 2], "r1")
    task = _validation_task(raw)
    assert task["update_name"] == "add" and task["workflow_type"] == "t" and task["history_events"]
    assert "UpdateAccepted" not in raw.types("wf-1")  # nothing is accepted before the verdict
    assert _answer(raw, task, "approve").json()["outcome"] == "approved"
    assert later.result().status_code == 200 and "UpdateAccepted" in raw.types("wf-1")
    duplicate = _answer(raw, task, "approve")
    assert duplicate.status_code == 409 and duplicate.json()["reason"] == "duplicate_update_validation_completion"

    later = _Later(raw, "wf-1", ["ink", 0], "r2")
    task = _validation_task(raw, standalone=True)
    other = _answer(raw, task, "reject", {"message": "no"}, owner="w9")
    assert other.status_code == 409 and other.json()["reason"] == "update_validation_lease_owner_mismatch"
    failure = {"message": "quantity must be positive", "reason": "update_validator_rejected", "type": "ValueError",
               "validation_errors": {"quantity": ["must be positive"]}}
    assert _answer(raw, task, "reject", failure).json()["outcome"] == "rejected"
    rejected = later.result()
    body = rejected.json()
    assert rejected.status_code == 422 and body["reason"] == "update_validator_rejected"
    assert body["update_status"] == "rejected" and body["validation_errors"] == {"quantity": ["must be positive"]}
    assert body["failure_type"] == "ValueError" and body["outcome"] == "rejected_invalid_arguments"
    again = _update(raw, "wf-1", ["ink", 0], "r2")  # a retry gets the same verdict, recorded once
    assert again.status_code == 422 and again.json()["update_id"] == body["update_id"]
    kinds = raw.types("wf-1")
    assert kinds.count("UpdateRejected") == 1 and kinds.count("UpdateAccepted") == 1
    rejection = next(e["payload"] for e in raw.history("wf-1") if e["event_type"] == "UpdateRejected")
    assert rejection["update_name"] == "add" and rejection["validation_errors"] == {"quantity": ["must be positive"]}
    conflict = _update(raw, "wf-1", ["other", 1], "r2")
    assert conflict.status_code == 422  # the retained rejection answers first, whatever the arguments

    client = Client(server.url)
    try:
        with pytest.raises(UpdateRejected) as raised:
            client.update_workflow("wf-1", "add", args=["ink", 0], request_id="r2")
        assert str(raised.value) == "quantity must be positive"
        assert raised.value.validation_errors == {"quantity": ["must be positive"]}
        assert raised.value.exception_type == "ValueError"
    finally:
        client.close()


def test_every_typed_refusal(server: DevServer) -> None:
    raw = Raw(server.url)
    client = Client(server.url)
    try:
        _register(raw)
        _started(raw, "wf-2")
        missing = _update(raw, "wf-2", ["x", 1], None)
        assert missing.status_code == 422 and missing.json()["reason"] == "update_validation_request_id_required"
        assert missing.json()["retryable"] is True
        assert _update(raw, "wf-2", ["x"], "plain-1", name="plain").status_code == 200  # no validator: accepted
        applied = raw.poll(timeout=2)
        assert raw.complete(applied, [{"type": "complete_update", "update_id": applied["workflow_update_id"],
                                       "result": envelope(None)}]).status_code == 200

        with pytest.raises(UpdateValidationFailed) as unclaimed:  # a capable worker that never polls
            client.update_workflow("wf-2", "add", args=["x", 1], request_id="r3")
        assert unclaimed.value.status == 504 and unclaimed.value.reason() == "update_validation_task_not_claimed"
        conflict = _update(raw, "wf-2", ["y", 1], "r3")
        assert conflict.status_code == 409 and conflict.json()["reason"] == "update_validation_idempotency_conflict"

        later = _Later(raw, "wf-2", ["x", 2], "r4")
        task = _validation_task(raw)
        failed = {"message": "workflow replay failed before update validation: boom",
                  "reason": "update_validation_worker_failed", "type": "UpdateValidationFailed"}
        assert _answer(raw, task, "reject", failed).json()["outcome"] == "failed"
        answer = later.result()
        assert answer.status_code == 409 and answer.json()["reason"] == "update_validation_worker_failed"

        later = _Later(raw, "wf-2", ["x", 3], "r5")
        task = _validation_task(raw)
        raw.call("DELETE", "/workers/w1", plane="control")  # its worker goes away while it validates
        lost = later.result()
        assert lost.status_code == 504 and lost.json()["reason"] == "update_validator_worker_lost"
        unavailable = _update(raw, "wf-2", ["x", 4], "r6")
        assert unavailable.status_code == 409 and unavailable.json()["reason"] == "update_validator_worker_unavailable"
        assert unavailable.json()["retryable"] is True

        _register(raw, "w2", capable=False)
        with pytest.raises(UpdateValidationFailed) as unsupported:
            client.update_workflow("wf-2", "add", args=["x", 5], request_id="r7")
        assert unsupported.value.reason() == "update_validation_capability_unsupported"
        assert unsupported.value.retryable is False
        _register(raw, "w3", contract={"updates": ["add"], "update_validators": []})
        incompatible = _update(raw, "wf-2", ["x", 6], "r8")
        assert incompatible.json()["reason"] == "update_validator_worker_incompatible"

        _register(raw, "w4", contract={"queries": [], "signals": [], "updates": ["add"]}, queue="q2")
        raw.start("wf-3", queue="q2")
        # the recorded contract names the update but not whether it has a validator
        assert "declared_update_validators" not in raw.history("wf-3")[1]["payload"]
        missing_contract = _update(raw, "wf-3", ["x", 1], "r9")
        assert missing_contract.status_code == 409
        assert missing_contract.json()["reason"] == "update_validator_contract_missing"
    finally:
        client.close()
