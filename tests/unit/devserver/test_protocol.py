"""Wire-level behaviour of the dev server: leases, fencing, retries, timeouts, waits, queries,
signals, parallel groups, paging, namespaces, updates and discovery."""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker.devserver import DevServer
from sync_worker.payloads import decode_envelope, envelope
from tests.unit.devserver._raw import Raw

FORBIDDEN_CAPABILITIES = ("activity_lease_renewal", "query_task_authority", "cooperative_cancellation",
                          "observability_context", "runtime_external_payload_transport")


@pytest.fixture
def fast_server() -> Iterator[DevServer]:
    with DevServer(workflow_task_lease_seconds=30, query_timeout_seconds=0.5) as server:
        yield server


@pytest.fixture
def raw(fast_server: DevServer) -> Raw:
    return Raw(fast_server.url)


def _wait(predicate: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition never became true")
        time.sleep(0.05)


def _activity(name: str = "a", **extra: Any) -> Dict[str, Any]:
    return {"type": "schedule_activity", "activity_type": name, "arguments": envelope([1]), "queue": "q", **extra}


def _act_call(raw: Raw, task: Dict[str, Any], op: str, **body: Any) -> Any:
    return raw.call("POST", f"/worker/activity-tasks/{task['task_id']}/{op}",
                    {"activity_attempt_id": task["activity_attempt_id"], "lease_owner": task["lease_owner"], **body},
                    plane="worker")


def test_cluster_info_advertises_only_what_exists(raw: Raw) -> None:
    info = raw.ok("GET", "/cluster/info")
    caps = info["worker_protocol"]["server_capabilities"]
    assert info["worker_protocol"]["version"] == "1.20" and info["control_plane"]["version"] == "2"
    assert caps["query_tasks"] is True and caps["worker_deregistration_fencing"]["supported"] is True
    assert info["limits"]["max_payload_bytes"] > 0
    assert not any(key in caps for key in FORBIDDEN_CAPABILITIES)
    assert caps["sticky_execution"]["supported"] is True  # devserver/sticky.py
    assert "upsert_memo" in caps["supported_workflow_task_commands"] and caps["workflow_memo_updates"]["supported"]
    # synchronous pre-accept update validation (devserver/update_validation.py)
    assert caps["update_validation_tasks"] is True and caps["synchronous_update_validation"]["supported"] is True


def test_poll_request_id_replays_the_same_lease(raw: Raw) -> None:
    raw.start("wf-1")
    first = raw.poll(poll_request_id="wf-poll-abc")
    again = raw.poll(poll_request_id="wf-poll-abc")
    assert again["task_id"] == first["task_id"] and again["workflow_task_attempt"] == first["workflow_task_attempt"]
    assert raw.poll(timeout=0, poll_request_id="wf-poll-other") is None


def test_waiting_for_history_releases_without_history_and_honours_dirty(raw: Raw) -> None:
    raw.start("wf-1")
    task = raw.poll()
    assert raw.complete(task, [_activity()]).status_code == 200
    first = raw.ok("POST", "/workflows/wf-1/signal/poke", {"request_id": "r1"})
    task = raw.poll()
    second = raw.ok("POST", "/workflows/wf-1/signal/poke", {"request_id": "r2"})  # arrives during the lease
    before = raw.types("wf-1")
    resp = raw.fail(task, {"message": "Workflow task waiting for scheduled history.",
                           "type": "WorkflowTaskWaitingForHistory"})
    assert resp.status_code == 200 and resp.json()["outcome"] == "released"
    # a released signal task acknowledged its signal (the PHP server's waiting_for_history): applied,
    # nothing else recorded, no retry
    assert raw.types("wf-1") == [*before, "SignalApplied"]
    assert raw.history("wf-1")[-1]["payload"]["signal_id"] == first["signal_id"]
    again = raw.poll()  # the signal that arrived during the lease needs a new task
    assert again is not None and again["workflow_task_attempt"] == 1
    assert again["task_id"] != task["task_id"] and again["workflow_signal_id"] == second["signal_id"]


def test_task_failure_requeues_the_next_attempt(raw: Raw) -> None:
    raw.start("wf-1")
    task = raw.poll()
    before = raw.types("wf-1")
    assert raw.fail(task, {"message": "boom", "type": "RuntimeError"}).json()["outcome"] == "failed"
    retry = raw.poll(timeout=5)
    assert retry["task_id"] == task["task_id"] and retry["workflow_task_attempt"] == 2
    assert raw.types("wf-1") == before
    stale = raw.complete(task, [{"type": "complete_workflow", "result": envelope(1)}])
    assert (stale.status_code, stale.json()["reason"]) == (409, "workflow_task_attempt_mismatch")
    duplicate = raw.fail(task, {"message": "boom", "type": "RuntimeError"})  # a replayed report: same receipt
    assert duplicate.status_code == 200 and duplicate.json()["outcome"] == "failed"
    assert raw.poll(timeout=0) is None  # ...and no second retry
    assert raw.complete(retry, [{"type": "complete_workflow", "result": envelope(1)}]).status_code == 200
    assert raw.types("wf-1") == [*before, "WorkflowCompleted"]


def test_fenced_deregistration_recovers_leases(raw: Raw) -> None:
    ack = raw.ok("POST", "/worker/register", {"worker_id": "w1", "task_queue": "q"}, plane="worker")
    token = ack["registration_token"]
    assert ack["registered"] is True and len(token) == 32 and token == token.lower()
    raw.start("wf-1")
    task = raw.poll(worker_id="w1")
    receipt = raw.ok("POST", "/worker/registrations/w1/deregister", {"registration_token": token}, plane="worker")
    assert receipt == {"worker_id": "w1", "outcome": "deregistered", "recovered_workflow_task_count": 1,
                       "registration_token": token}
    assert raw.ok("POST", "/worker/registrations/w1/deregister", {"registration_token": token},
                  plane="worker") == receipt
    stale = raw.complete(task, [{"type": "complete_workflow", "result": envelope(1)}])
    assert (stale.status_code, stale.json()["reason"]) == (409, "task_not_leased")
    replacement = raw.poll(worker_id="w2")
    assert replacement["workflow_task_attempt"] == 2
    stale = raw.complete(task, [{"type": "complete_workflow", "result": envelope(1)}])
    assert (stale.status_code, stale.json()["reason"]) == (409, "workflow_task_attempt_mismatch")
    assert raw.ok("GET", "/workers/w1")["status"] == "deregistered"
    gone = raw.call("DELETE", "/worker/registrations/nobody", plane="worker")
    assert (gone.status_code, gone.json()["reason"]) == (404, "worker_not_found")


def test_changed_definition_for_an_active_worker_is_refused(raw: Raw) -> None:
    body = {"worker_id": "w1", "task_queue": "q", "workflow_definition_fingerprints": {"t": "sha256:aa"}}
    raw.ok("POST", "/worker/register", body, plane="worker")
    changed = raw.call("POST", "/worker/register", {**body, "workflow_definition_fingerprints": {"t": "sha256:bb"}},
                       plane="worker")
    assert (changed.status_code, changed.json()["reason"]) == (409, "workflow_definition_changed")
    assert raw.ok("POST", "/worker/heartbeat", {"worker_id": "w1"}, plane="worker")["acknowledged"] is True
    assert [w["worker_id"] for w in raw.ok("GET", "/workers")["workers"]] == ["w1"]


def test_activity_fencing_idempotency_and_cancellation(raw: Raw) -> None:
    raw.start("wf-1")
    raw.complete(raw.poll(), [_activity(), _activity("b")])
    first = raw.poll(kind="activity")
    second = raw.poll(kind="activity")
    wrong = raw.call("POST", f"/worker/activity-tasks/{first['task_id']}/complete",
                     {"activity_attempt_id": "attempt-bogus", "lease_owner": "w1", "result": envelope(1)},
                     plane="worker")
    assert (wrong.status_code, wrong.json()["reason"]) == (409, "activity_attempt_mismatch")
    done = _act_call(raw, first, "complete", result=envelope(7))
    assert done.status_code == 200
    assert _act_call(raw, first, "complete", result=envelope(7)).json() == done.json()
    assert raw.types("wf-1").count("ActivityCompleted") == 1
    beat = _act_call(raw, second, "heartbeat", details={"p": 1}).json()
    assert (beat["cancel_requested"], beat["can_continue"]) == (False, True)
    raw.ok("POST", "/workflows/wf-1/cancel", {"reason": "stop"})
    beat = _act_call(raw, second, "heartbeat").json()
    assert beat["cancel_requested"] is True and beat["can_continue"] is False
    late = _act_call(raw, second, "complete", result=envelope(1))
    assert late.status_code == 409
    assert raw.types("wf-1")[-3:] == ["CancelRequested", "ActivityCancelled", "WorkflowCancelled"]
    again = raw.call("POST", "/workflows/wf-1/cancel", {})
    assert (again.status_code, again.json()["reason"]) == (409, "run_not_active")


def test_activity_retry_policy_and_non_retryable_failures(raw: Raw) -> None:
    raw.start("wf-1")
    policy = {"max_attempts": 3, "backoff_seconds": [1, 1], "non_retryable_error_types": ["Fatal"]}
    raw.complete(raw.poll(), [_activity(retry_policy=policy)])
    attempt1 = raw.poll(kind="activity")
    _act_call(raw, attempt1, "fail", failure={"message": "try again", "type": "Transient"})
    t0 = time.monotonic()
    attempt2 = raw.poll(kind="activity", timeout=5)
    assert time.monotonic() - t0 >= 0.8  # not claimable before its backoff
    assert attempt2["attempt_number"] == 2 and attempt2["activity_attempt_id"] != attempt1["activity_attempt_id"]
    _act_call(raw, attempt2, "fail", failure={"message": "no way", "type": "Fatal", "class": "x.Fatal"})
    events = raw.history("wf-1")
    assert [e["event_type"] for e in events] == [
        "StartAccepted", "WorkflowStarted", "ActivityScheduled", "ActivityStarted", "ActivityRetryScheduled",
        "ActivityStarted", "ActivityFailed"]
    failed = [e for e in events if e["event_type"] == "ActivityFailed"]
    assert len(failed) == 1 and failed[0]["payload"]["exception_type"] == "Fatal"
    assert failed[0]["payload"]["message"] == "no way"
    assert raw.poll(timeout=2)["workflow_id"] == "wf-1"  # the run wakes for the terminal failure


def test_activity_timeouts(raw: Raw) -> None:
    raw.start("wf-1")
    raw.complete(raw.poll(), [
        _activity("slow", start_to_close_timeout=1, retry_policy={"max_attempts": 2, "backoff_seconds": [1]}),
        _activity("never", queue="nobody-polls", schedule_to_start_timeout=1)])
    raw.poll(kind="activity")  # attempt 1 of "slow" is claimed and then goes silent
    _wait(lambda: "ActivityTimedOut" in raw.types("wf-1"), timeout=8)
    timed = [e["payload"] for e in raw.history("wf-1") if e["event_type"] == "ActivityTimedOut"]
    assert timed[0]["activity_type"] == "never" and timed[0]["timeout_kind"] == "schedule_to_start"
    retry = raw.poll(kind="activity", timeout=5)
    assert retry["activity_type"] == "slow" and retry["attempt_number"] == 2
    _wait(lambda: raw.types("wf-1").count("ActivityTimedOut") == 2, timeout=8)
    kinds = [e["payload"].get("timeout_kind") for e in raw.history("wf-1")
             if e["event_type"] in ("ActivityTimedOut", "ActivityRetryScheduled")]
    assert sorted(kinds) == ["schedule_to_start", "start_to_close", "start_to_close"]  # same tick: any order


def test_condition_wait_timeout_and_satisfaction(raw: Raw) -> None:
    raw.start("wf-1")
    task = raw.poll()
    raw.complete(task, [{"type": "open_condition_wait", "condition_key": "k", "timeout_seconds": 1}])
    _wait(lambda: "TimerFired" in raw.types("wf-1"), timeout=5)
    fired = raw.history("wf-1")[-1]["payload"]
    opened = next(e for e in raw.history("wf-1") if e["event_type"] == "ConditionWaitOpened")["payload"]
    assert fired["timer_kind"] == "condition_timeout" and fired["condition_wait_id"] == opened["condition_wait_id"]
    task = raw.poll()
    raw.complete(task, [{"type": "complete_workflow", "result": envelope(False)}])
    assert "ConditionWaitSatisfied" not in raw.types("wf-1")


def test_query_without_a_worker_times_out(raw: Raw) -> None:
    raw.start("wf-1")
    resp = raw.call("POST", "/workflows/wf-1/query/state", {})
    assert (resp.status_code, resp.json()["reason"]) == (504, "query_worker_timeout")


def test_query_task_round_trip_and_rejection(raw: Raw) -> None:
    import threading

    raw.start("wf-1")
    answers: List[Any] = []

    def ask(name: str) -> None:
        answers.append(raw.call("POST", f"/workflows/wf-1/query/{name}", {"input": envelope([1])}))

    for name, outcome in (("state", "complete"), ("missing", "fail")):
        thread = threading.Thread(target=ask, args=(name,))
        thread.start()
        task = raw.poll(kind="query", timeout=5)
        assert task["query_name"] == name and task["payload_codec"] == "avro" and task["lease_owner"] == "w1"
        body: Dict[str, Any] = {"lease_owner": "w1", "query_task_attempt": 1}
        if outcome == "complete":
            body.update(result={"ok": True}, result_envelope=envelope({"ok": True}))
        else:
            body["failure"] = {"message": "unknown query", "reason": "rejected_unknown_query"}
        raw.ok("POST", f"/worker/query-tasks/{task['query_task_id']}/{outcome}", body, plane="worker")
        thread.join(5)
    ok, rejected = answers
    assert ok.status_code == 200 and decode_envelope(ok.json()["result_envelope"]) == {"ok": True}
    assert (rejected.status_code, rejected.json()["reason"]) == (404, "rejected_unknown_query")


def test_signal_request_ids_deduplicate(raw: Raw) -> None:
    raw.start("wf-1")
    one = raw.ok("POST", "/workflows/wf-1/signal/go", {"request_id": "r1", "input": envelope([1])})
    two = raw.ok("POST", "/workflows/wf-1/signal/go", {"request_id": "r1", "input": envelope([1])})
    assert one["signal_id"] == two["signal_id"]
    conflict = raw.call("POST", "/workflows/wf-1/signal/go", {"request_id": "r1", "input": envelope([2])})
    assert (conflict.status_code, conflict.json()["reason"]) == (409, "request_id_conflict")
    assert raw.types("wf-1").count("SignalReceived") == 1
    duplicate = raw.call("POST", "/workflows", {"workflow_id": "wf-1", "workflow_type": "t", "task_queue": "q",
                                                "input": envelope([])})
    assert (duplicate.status_code, duplicate.json()["reason"]) == (409, "duplicate_not_allowed")


def test_parallel_group_barrier_and_re_emission(raw: Raw) -> None:
    raw.start("wf-1")
    group = {"parallel_group_id": "parallel-activities:1:2", "parallel_group_kind": "activity",
             "parallel_group_base_sequence": 1, "parallel_group_size": 2}
    commands = [_activity("a", **group, parallel_group_index=0), _activity("b", **group, parallel_group_index=1)]
    raw.complete(raw.poll(), commands)
    first, second = raw.poll(kind="activity"), raw.poll(kind="activity")
    _act_call(raw, second, "complete", result=envelope("b"))
    assert raw.poll(timeout=1) is None  # half a group never wakes the run
    raw.ok("POST", "/workflows/wf-1/signal/go", {"request_id": "r"})
    woken = raw.poll()
    assert raw.complete(woken, commands).status_code == 200  # re-emitted members are ignored
    assert raw.types("wf-1").count("ActivityScheduled") == 2
    _act_call(raw, first, "complete", result=envelope("a"))
    task = raw.poll()
    completed = [e["payload"] for e in task["history_events"] if e["event_type"] == "ActivityCompleted"]
    assert {c["parallel_group_index"] for c in completed} == {0, 1}
    assert all(c["parallel_group_id"] == group["parallel_group_id"] for c in completed)


def test_history_paging_in_tasks_and_history_route(raw: Raw) -> None:
    raw.start("wf-1")
    task = raw.poll()
    raw.complete(task, [{"type": "record_side_effect", "result": envelope(i)["blob"]} for i in range(5)]
                 + [{"type": "start_timer", "delay_seconds": 0}])
    task = raw.poll(history_page_size=3, timeout=5)
    assert len(task["history_events"]) == 3 and task["next_history_page_token"]
    events = list(task["history_events"])
    token = task["next_history_page_token"]
    while token:
        page = raw.ok("POST", f"/worker/workflow-tasks/{task['task_id']}/history",
                      {"next_history_page_token": token, "lease_owner": "w1",
                       "workflow_task_attempt": task["workflow_task_attempt"]}, plane="worker")
        events += page["history_events"]
        token = page["next_history_page_token"]
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert [e["event_type"] for e in events] == raw.types("wf-1")


def test_namespaces_are_isolated() -> None:
    with DevServer(namespaces=("default", "other")) as server:
        default, other = Raw(server.url), Raw(server.url, namespace="other")
        other.start("wf-1")
        assert default.poll(timeout=0) is None
        assert default.call("GET", "/workflows/wf-1").status_code == 404
        assert other.poll(timeout=1)["workflow_id"] == "wf-1"
        ghost = Raw(server.url, namespace="ghost").call("GET", "/workflows")
        assert (ghost.status_code, ghost.json()["reason"]) == (404, "namespace_not_found")


def test_terminate_applies_parent_close_policy(raw: Raw) -> None:
    raw.start("parent")
    raw.complete(raw.poll(), [{"type": "start_child_workflow", "workflow_type": "c", "arguments": envelope([]),
                               "queue": "q", "parent_close_policy": "terminate"}])
    child_id = next(e for e in raw.history("parent") if e["event_type"] == "ChildWorkflowScheduled")[
        "payload"]["child_workflow_instance_id"]
    raw.ok("POST", "/workflows/parent/terminate", {"reason": "ops"})
    assert raw.types("parent")[-1] == "WorkflowTerminated"
    assert raw.ok("GET", f"/workflows/{child_id}")["status"] == "terminated"


def test_update_round_trip(raw: Raw) -> None:
    import threading

    raw.start("wf-1")
    raw.complete(raw.poll(), [{"type": "open_condition_wait", "condition_key": "k"}])
    responses: List[Any] = []
    thread = threading.Thread(target=lambda: responses.append(raw.call(
        "POST", "/workflows/wf-1/update/rename", {"input": envelope(["x"]), "wait_for": "completed",
                                                  "request_id": "u1", "wait_timeout_seconds": 10})))
    thread.start()
    task = raw.poll(timeout=5)
    assert task["workflow_update_id"]
    raw.complete(task, [{"type": "complete_update", "update_id": task["workflow_update_id"],
                         "result": envelope("renamed")}])
    thread.join(10)
    body = responses[0].json()
    assert responses[0].status_code == 200 and body["update_status"] == "completed"
    assert decode_envelope(body["result_envelope"]) == "renamed"
    assert raw.types("wf-1")[-4:] == ["UpdateAccepted", "UpdateApplied", "UpdateCompleted", "MessageCursorAdvanced"]
    follow_up = raw.poll(timeout=2)  # the run replays again after the update's handler ran
    assert follow_up is not None and not follow_up.get("workflow_update_id")


def test_run_timeout_closes_the_run(raw: Raw) -> None:
    raw.ok("POST", "/workflows", {"workflow_id": "wf-slow", "workflow_type": "t", "task_queue": "q",
                                  "input": envelope([]), "run_timeout_seconds": 1, "execution_timeout_seconds": 60})
    raw.complete(raw.poll(), [{"type": "start_timer", "delay_seconds": 30}])
    _wait(lambda: raw.ok("GET", "/workflows/wf-slow")["status"] == "failed", timeout=5)
    desc = raw.ok("GET", "/workflows/wf-slow")
    assert desc["closed_reason"] == "timed_out"
    events = raw.history("wf-slow")
    assert [e["event_type"] for e in events][-1] == "WorkflowTimedOut"
    assert events[-1]["payload"]["timeout_kind"] == "run_timeout"
    assert "TimerCancelled" not in [e["event_type"] for e in events]


def test_the_earlier_execution_timeout_closes_the_run(raw: Raw) -> None:
    """One deadline timer per run (the earlier): here the execution timeout, with the run's far away."""
    raw.ok("POST", "/workflows", {"workflow_id": "wf-slow", "workflow_type": "t", "task_queue": "q",
                                  "input": envelope([]), "run_timeout_seconds": 60, "execution_timeout_seconds": 1})
    raw.complete(raw.poll(), [{"type": "start_timer", "delay_seconds": 30}])
    _wait(lambda: raw.ok("GET", "/workflows/wf-slow")["status"] == "failed", timeout=5)
    events = raw.history("wf-slow")
    assert [e["event_type"] for e in events][-1] == "WorkflowTimedOut"
    assert events[-1]["payload"]["timeout_kind"] == "execution_timeout"
    assert "TimerCancelled" not in [e["event_type"] for e in events]


@pytest.mark.parametrize("name", ["workflow-waiting-history-type", "workflow-waiting-history-message"])
def test_pending_history_reports_release_the_lease(name: str, raw: Raw) -> None:
    from tests._fixtures import load_fixture

    failure = load_fixture(f"server-index/tests/Fixtures/ServerParityPending/{name}.json")["waiting_for_history"][
        "failure"]
    raw.start("wf-1")
    task = raw.poll()
    raw.complete(task, [{"type": "start_timer", "delay_seconds": 0}, _activity()])
    task = raw.poll(timeout=5)  # the timer fired while the activity is unresolved (the fixture's shape)
    before = raw.history("wf-1")
    assert before[-1]["event_type"] == "TimerFired"
    resp = raw.fail(task, failure)
    assert resp.status_code == 200 and resp.json()["outcome"] == "released"
    assert raw.history("wf-1") == before
    assert raw.poll(timeout=0) is None  # no task retry
    again = raw.fail(task, failure)  # the same report again is answered from its receipt
    assert again.status_code == 200 and again.json()["outcome"] == "released"


def test_transient_task_failures_retry_on_the_original_run(raw: Raw) -> None:
    from tests._fixtures import load_fixture

    spec = load_fixture("server-index/tests/Fixtures/ServerParityPending/workflow-task-transient-retry.json")
    raw.start("wf-1", args=[spec["input"]])
    task = raw.poll()
    for attempt, failure in enumerate(spec["workflow_task_retry"]["failures"], start=1):
        assert task["workflow_task_attempt"] == attempt
        assert raw.fail(task, failure).json()["outcome"] == "failed"
        task = raw.poll(timeout=5)
    assert raw.complete(task, [{"type": "complete_workflow", "result": task["arguments"]}]).status_code == 200
    assert raw.types("wf-1") == spec["workflow_task_retry"]["expected_peer_events"]
    assert decode_envelope(raw.ok("GET", "/workflows/wf-1")["output_envelope"]) == [spec["input"]]


@pytest.mark.parametrize("name", ["worker-registration-fencing", "worker-registration-live-lease",
                                  "worker-sdk-reply-reconciliation"])
def test_deregistration_fixtures(name: str, raw: Raw) -> None:
    from tests._fixtures import load_fixture

    spec = load_fixture(f"server-index/tests/Fixtures/ServerParityPending/{name}.json")["worker_deregistration"]
    token = raw.ok("POST", "/worker/register", {"worker_id": "w1", "task_queue": "q"},
                   plane="worker")["registration_token"]
    raw.start(f"peer{spec['peer_suffix']}", workflow_type=spec["peer_workflow_type"])
    leased = raw.poll(worker_id="w1")
    if spec.get("replace_live_registration"):
        token = raw.ok("POST", "/worker/register", {"worker_id": "w1", "task_queue": "q"},
                       plane="worker")["registration_token"]
    receipt = raw.ok("POST", "/worker/registrations/w1/deregister", {"registration_token": token}, plane="worker")
    assert receipt["recovered_workflow_task_count"] == spec["recovered_workflow_task_count"]
    assert raw.ok("POST", "/worker/registrations/w1/deregister", {"registration_token": token},
                  plane="worker") == receipt  # a lost reply is reconciled by replaying the same request
    stale = raw.complete(leased, [{"type": "complete_workflow", "result": envelope(1)}])
    assert stale.json()["reason"] == spec["first_stale_reason"]
    replacement = raw.poll(worker_id="w2")
    stale = raw.complete(leased, [{"type": "complete_workflow", "result": envelope(1)}])
    assert stale.json()["reason"] == spec["replacement_stale_reason"]
    assert raw.complete(replacement, [{"type": "complete_workflow", "result": envelope(1)}]).status_code == 200
