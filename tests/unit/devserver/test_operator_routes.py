"""Task queues, build-id rollouts, worker records, search attributes, history export and the
maintenance commands on the dev server, over real sockets, against the control-plane fixtures'
response shapes (``fixtures/sdk-python/tests/fixtures/control-plane``)."""

from __future__ import annotations

import copy
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker.devserver import DevServer
from sync_worker.payloads import decode_envelope, envelope
from tests._fixtures import load_fixture
from tests._sdk_missing import SDK_MISSING
from tests.unit.devserver._raw import Raw

CONTROL_PLANE = "sdk-python/tests/fixtures/control-plane"


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer(workflow_task_lease_seconds=30) as srv:
        yield srv


@pytest.fixture
def raw(server: DevServer) -> Raw:
    return Raw(server.url)


def _fixture_body(name: str) -> Dict[str, Any]:
    return dict(load_fixture(f"{CONTROL_PLANE}/{name}-parity.json")["response_body"])


def _same_keys(ours: Any, theirs: Any, path: str = "") -> List[str]:
    """Keys the fixture's response has that ours lacks (recursively through objects and first items)."""
    missing: List[str] = []
    if isinstance(theirs, dict) and isinstance(ours, dict):
        for key, value in theirs.items():
            if key not in ours:
                missing.append(f"{path}{key}")
            else:
                missing += _same_keys(ours[key], value, f"{path}{key}.")
    elif isinstance(theirs, list) and theirs and isinstance(ours, list) and ours:
        missing += _same_keys(ours[0], theirs[0], f"{path}0.")
    return missing


def _register(raw: Raw, worker_id: str, queue: str, build_id: Any = "build-231") -> None:
    raw.ok("POST", "/worker/register", {"worker_id": worker_id, "task_queue": queue, "build_id": build_id,
                                        "runtime": "python", "sdk_version": "sync-worker/test",
                                        "max_concurrent_workflow_tasks": 4, "max_concurrent_activity_tasks": 8,
                                        "supported_workflow_types": ["orders.fulfillment"],
                                        "supported_activity_types": ["inventory.sync"]}, plane="worker")


def test_task_queue_list_and_describe(raw: Raw) -> None:
    _register(raw, "worker-alpha", "orders-critical")
    raw.start("wf-a", workflow_type="orders.fulfillment", queue="orders-critical")  # a type the worker runs
    raw.start("wf-b", workflow_type="orders.fulfillment", queue="orders-critical")
    task = raw.poll(queue="orders-critical", worker_id="worker-alpha")
    raw.start("wf-c", queue="orders-standard")

    listed = raw.ok("GET", "/task-queues")
    assert [q["name"] for q in listed["task_queues"]] == ["orders-critical", "orders-standard"]
    assert _same_keys(listed, _fixture_body("task-queue-list")) == []
    critical = listed["task_queues"][0]
    assert critical["stats"]["workflow_tasks"] == {"ready_count": 1, "leased_count": 1, "expired_lease_count": 0}
    assert critical["stats"]["approximate_backlog_count"] == 1
    assert critical["admission"]["workflow_tasks"]["status"] == "accepting"

    described = raw.ok("GET", "/task-queues/orders-critical")
    assert _same_keys(described, _fixture_body("task-queue-describe")) == []
    assert described["current_leases"] == [{
        "task_id": task["task_id"], "task_type": "workflow", "workflow_id": task["workflow_id"],
        "run_id": task["run_id"], "lease_owner": "worker-alpha", "lease_expires_at": task["lease_expires_at"],
        "is_expired": False, "workflow_task_attempt": 1}]
    assert [(p["worker_id"], p["build_id"], p["status"]) for p in described["pollers"]] == [
        ("worker-alpha", "build-231", "active")]
    assert raw.ok("GET", "/task-queues/never-used")["stats"]["approximate_backlog_count"] == 0


def test_build_id_rollout_drain_promote_resume(raw: Raw) -> None:
    _register(raw, "w-new", "orders-critical", "build-2026.04.22-a1")
    _register(raw, "w-old", "orders-critical", "build-2026.04.21-z9")
    _register(raw, "w-unversioned", "orders-critical", None)
    drained = raw.ok("POST", "/task-queues/orders-critical/build-ids/drain", {"build_id": "build-2026.04.21-z9"})
    assert _same_keys(drained, _fixture_body("task-queue-build-id-drain")) == []
    assert drained["drain_intent"] == "draining" and drained["drained_at"]
    rollout = raw.ok("GET", "/task-queues/orders-critical/build-ids")
    assert _same_keys(rollout, _fixture_body("task-queue-build-ids")) == []
    statuses = {c["build_id"]: (c["rollout_status"], c["active_worker_count"], c["draining_worker_count"])
                for c in rollout["build_ids"]}
    assert statuses == {"build-2026.04.22-a1": ("active", 1, 0), "build-2026.04.21-z9": ("draining", 0, 1),
                        None: ("active", 1, 0)}
    promoted = raw.ok("POST", "/task-queues/orders-critical/build-ids/promote", {"build_id": "build-2026.04.21-z9"})
    assert _same_keys(promoted, _fixture_body("task-queue-build-id-promote")) == []
    assert (promoted["drain_intent"], promoted["drained_at"], promoted["new_start_selected"]) == ("active", None, True)
    raw.ok("POST", "/task-queues/orders-critical/build-ids/drain", {"build_id": "build-2026.04.21-z9"})
    resumed = raw.ok("POST", "/task-queues/orders-critical/build-ids/resume", {"build_id": "build-2026.04.21-z9"})
    assert _same_keys(resumed, _fixture_body("task-queue-build-id-resume")) == []
    assert (resumed["drain_intent"], resumed["drained_at"]) == ("active", None)
    unversioned = raw.ok("POST", "/task-queues/orders-critical/build-ids/drain", {"build_id": None})
    assert (unversioned["build_id"], unversioned["drain_intent"]) == (None, "draining")
    again = raw.ok("POST", "/task-queues/orders-critical/build-ids/drain", {"build_id": None})
    assert again["drained_at"] == unversioned["drained_at"]  # idempotent: the first drain's time stays
    cohorts = {c["build_id"]: c["rollout_status"] for c in raw.ok("GET", "/task-queues/orders-critical/build-ids")[
        "build_ids"]}
    assert cohorts[None] == "draining"
    for body in ({}, {"build_id": ""}, {"build_id": 7}):
        bad = raw.call("POST", "/task-queues/orders-critical/build-ids/drain", body)
        assert (bad.status_code, bad.json()["reason"]) == (422, "validation_failed")


def test_worker_records_have_the_fixture_shape(raw: Raw) -> None:
    _register(raw, "polyglot-worker-231", "external-workflows")
    listed = raw.ok("GET", "/workers?task_queue=external-workflows&status=active")
    assert _same_keys(listed, _fixture_body("worker-list")) == []
    described = raw.ok("GET", "/workers/polyglot-worker-231")
    assert _same_keys(described, _fixture_body("worker-describe")) == []
    assert (described["max_concurrent_activity_tasks"], described["supported_workflow_types"]) == (
        8, ["orders.fulfillment"])


def test_search_attribute_definitions(raw: Raw) -> None:
    created = raw.call("POST", "/search-attributes", {"name": "OrderStatus", "type": "keyword"})
    assert created.status_code == 201 and created.json() == _fixture_body("search-attribute-create")
    raw.ok("POST", "/search-attributes", {"name": "Priority", "type": "int"})
    listed = raw.ok("GET", "/search-attributes")
    assert listed["custom_attributes"] == {"OrderStatus": "keyword", "Priority": "int"}
    assert {"WorkflowType": "keyword", "StartTime": "datetime"}.items() <= listed["system_attributes"].items()
    for body, status, reason in (({"name": "OrderStatus", "type": "keyword"}, 409, "search_attribute_already_exists"),
                                 ({"name": "WorkflowType", "type": "keyword"}, 409, "search_attribute_reserved"),
                                 ({"name": "9bad", "type": "keyword"}, 422, "validation_failed"),
                                 ({"name": "Fine", "type": "blob"}, 422, "validation_failed")):
        resp = raw.call("POST", "/search-attributes", body)
        assert (resp.status_code, resp.json()["reason"]) == (status, reason)
    assert raw.ok("DELETE", "/search-attributes/OrderStatus") == _fixture_body("search-attribute-delete")
    assert raw.call("DELETE", "/search-attributes/OrderStatus").json()["reason"] == "search_attribute_not_found"
    other = Raw(raw.url, "other")
    assert other.call("GET", "/search-attributes").json()["reason"] == "namespace_not_found"


def test_history_export_bundle_verifies_with_the_sdk_verifier(raw: Raw) -> None:
    raw.start("wf-export", args=[{"text": "héllo λ 😀", "big": 9007199254740993, "ratio": 0.1, "huge": 1.5e20}])
    task = raw.poll()
    raw.complete(task, [{"type": "complete_workflow", "result": envelope({"ok": True})}])
    run_id = raw.ok("GET", "/workflows/wf-export")["run_id"]
    bundle = raw.ok("GET", f"/workflows/wf-export/runs/{run_id}/history/export")
    fixture = _fixture_body("workflow-history-export")
    assert _same_keys(bundle, fixture) == []
    assert bundle["schema"] == "durable-workflow.v2.history-export" and bundle["history_complete"] is True
    assert [e["type"] for e in bundle["history_events"]] == raw.types("wf-export")
    assert decode_envelope(bundle["payloads"]["output"]["data"]) == {"ok": True}
    # the published SDK's verifier (it needs Python 3.10+) checks the bundle's integrity proof
    verify_bundle = pytest.importorskip("durable_workflow.history_bundle_verify", reason=SDK_MISSING).verify_bundle
    report = verify_bundle(bundle)
    assert report["status"] == "ok", report
    tampered = copy.deepcopy(bundle)
    tampered["history_events"][1]["payload"]["workflow_type"] = "forged"
    assert verify_bundle(tampered)["status"] == "failed"
    missing = raw.call("GET", "/workflows/wf-export/runs/run-nope/history/export")
    assert missing.status_code == 404


def test_repair_archive_and_redrive(server: DevServer, raw: Raw) -> None:
    raw.start("wf-stranded")
    engine = server.engine
    with engine.tx():  # strand the run: its only workflow task is lost
        run = engine.current_run("default", "wf-stranded")
        assert run is not None
        engine.store.delete("wf_tasks", run["task_id"])
    assert raw.poll(timeout=0) is None
    repaired = raw.ok("POST", "/workflows/wf-stranded/repair", {})
    assert (repaired["outcome"], repaired["command_status"], repaired["repaired"]) == (
        "repair_requested", "accepted", True)
    assert _same_keys(repaired, _fixture_body("workflow-repair")) == []
    task = raw.poll(timeout=1)
    assert task is not None and task["workflow_id"] == "wf-stranded"
    healthy = raw.ok("POST", "/workflows/wf-stranded/repair", {})
    assert healthy["repaired"] is False  # a leased task is outstanding: nothing to do
    open_archive = raw.call("POST", "/workflows/wf-stranded/archive", {"reason": "retention policy cleanup"})
    assert (open_archive.status_code, open_archive.json()["reason"]) == (409, "run_not_closed")
    raw.complete(task, [{"type": "fail_workflow", "message": "boom"}])
    archived = raw.ok("POST", "/workflows/wf-stranded/archive", {"reason": "retention policy cleanup"})
    assert _same_keys(archived, _fixture_body("workflow-archive")) == []
    assert (archived["outcome"], archived["reason"]) == ("archived", "retention policy cleanup")
    closed = raw.ok("POST", "/workflows/wf-stranded/repair", {})
    assert (closed["outcome"], closed["repaired"]) == ("repair_not_needed", False)
    run_id = raw.ok("GET", "/workflows/wf-stranded")["run_id"]
    redrive = raw.call("POST", f"/workflows/wf-stranded/runs/{run_id}/redrive", {})
    assert (redrive.status_code, redrive.json()["reason"]) == (409, "redrive_unsupported")
    bad = raw.call("POST", "/workflows/wf-stranded/archive", {"reason": ["x"]})
    assert bad.status_code == 422


def test_cluster_info_advertises_the_operator_surface(raw: Raw) -> None:
    features = raw.ok("GET", "/cluster/info")["control_plane"]["features"]
    for name in ("namespaces", "schedules", "task_queues", "worker_records", "search_attributes", "history_export",
                 "workflow_repair", "workflow_archive", "system_maintenance"):
        assert features[name]["supported"] is True, name
    assert "workflow_redrive" not in features
    for path in ("/storage/test", "/bridge-adapters/webhook/x"):
        resp = raw.call("POST", path, {})
        assert (resp.status_code, resp.json()["reason"]) == (404, "route_not_found")


def test_system_repair_status_and_pass() -> None:
    # no scheduler sweep (tick_seconds=3600): otherwise, on a loaded machine, the scheduler can
    # re-queue the expired lease between the status and the pass, and the pass has nothing left
    with DevServer(workflow_task_lease_seconds=30, tick_seconds=3600) as server:
        _repair_status_and_pass(server, Raw(server.url))


def _repair_status_and_pass(server: DevServer, raw: Raw) -> None:
    raw.start("wf-lost")
    raw.start("wf-leased")
    leased = raw.poll(worker_id="w-gone")
    lost = next(w for w in ("wf-lost", "wf-leased") if w != leased["workflow_id"])
    engine = server.engine
    with engine.tx():
        run = engine.current_run("default", lost)
        assert run is not None
        engine.store.delete("wf_tasks", run["task_id"])  # a run stranded without a task
        task = engine.store.get("wf_tasks", leased["task_id"])
        assert task is not None
        task["lease_expires_at"] = task["due_at"] = 0.0  # a lease that expired and was not yet swept
        engine.store.put("wf_tasks", task)
    status = raw.ok("GET", "/system/repair")
    assert _same_keys(status, _fixture_body("system-repair-status")) == []
    assert (status["candidates"]["existing_task_candidates"], status["candidates"]["missing_task_candidates"]) == (1, 1)
    assert sorted(s["scope_key"].split(":")[0] for s in status["candidates"]["scopes"]) == ["wf-leased", "wf-lost"]
    repaired = raw.ok("POST", "/system/repair/pass", {})
    assert _same_keys(repaired, _fixture_body("system-repair-pass")) == []
    assert (repaired["repaired_existing_tasks"], repaired["repaired_missing_tasks"], repaired["dispatched_tasks"]) == (
        1, 1, 2)
    claimed = {raw.poll(worker_id="w-new", timeout=1)["workflow_id"] for _ in range(2)}
    assert claimed == {"wf-lost", "wf-leased"}
    assert raw.ok("GET", "/system/repair")["candidates"]["total_candidates"] == 0
    bad = raw.call("POST", "/system/repair/pass", {"run_ids": "all"})
    assert (bad.status_code, bad.json()["reason"]) == (422, "validation_failed")


def test_system_retention_status_and_pass(server: DevServer, raw: Raw) -> None:
    raw.ok("POST", "/namespaces", {"name": "short", "retention_days": 1})
    short = Raw(server.url, "short")
    for workflow_id in ("old-done", "fresh-done", "still-open"):
        short.start(workflow_id)
    for _ in range(2):
        task = short.poll(timeout=1)
        if task["workflow_id"] == "still-open":
            task = short.poll(timeout=1)
        short.complete(task, [{"type": "complete_workflow", "result": envelope(1)}])
    engine = server.engine
    with engine.tx():
        old = engine.current_run("short", "old-done")
        assert old is not None and old["status"] == "completed"
        old["closed_at"] = old["closed_at"] - 2 * 86400  # closed two days ago
        engine.save_run(old)
    status = short.ok("GET", "/system/retention")
    assert _same_keys(status, _fixture_body("system-retention-status")) == []
    assert (status["retention_days"], status["expired_run_ids"]) == (1, [old["run_id"]])
    open_run = short.ok("GET", "/workflows/still-open")["run_id"]
    fresh = short.ok("GET", "/workflows/fresh-done")["run_id"]
    pruned = short.ok("POST", "/system/retention/pass", {"run_ids": [old["run_id"], open_run, fresh], "limit": 50})
    assert _same_keys(pruned, _fixture_body("system-retention-pass")) == []
    assert [(r["outcome"], r.get("reason")) for r in pruned["results"]] == [
        ("pruned", None), ("skipped", "run_not_terminal"), ("skipped", "retention_not_expired")]
    assert pruned["results"][0]["history_events_deleted"] >= 3
    assert short.call("GET", "/workflows/old-done").status_code == 404
    assert short.ok("GET", "/system/retention")["expired_run_count"] == 0
    assert short.call("POST", "/system/retention/pass", {"limit": 0}).status_code == 422


def test_system_activity_timeout_status_and_pass() -> None:
    with DevServer(tick_seconds=3600) as server:  # no scheduler sweep: the pass does the work
        raw = Raw(server.url)
        raw.start("wf-act")
        raw.complete(raw.poll(), [
            {"type": "schedule_activity", "activity_type": "a", "arguments": envelope([]), "queue": "q",
             "start_to_close_timeout": 1, "retry_policy": {"max_attempts": 2, "backoff_seconds": [1]}},
            {"type": "schedule_activity", "activity_type": "b", "arguments": envelope([]), "queue": "q",
             "start_to_close_timeout": 3600}])
        first = raw.poll(kind="activity", timeout=1)
        raw.poll(kind="activity", timeout=1)
        engine = server.engine
        with engine.tx():
            act = engine.store.get("activities", first["activity_execution_id"])
            assert act is not None
            act["due_at"] = act["lease_expires_at"] = act["started_at"] - 5  # its start-to-close ran out
            engine.store.put("activities", act)
        status = raw.ok("GET", "/system/activity-timeouts")
        assert _same_keys(status, _fixture_body("system-activity-timeout-status")) == []
        assert status["expired_execution_ids"] == [first["activity_execution_id"]]
        others = [a["execution_id"] for a in engine.store.iter_all("activities")
                  if a["execution_id"] != first["activity_execution_id"]]
        passed = raw.ok("POST", "/system/activity-timeouts/pass",
                        {"execution_ids": [first["activity_execution_id"], *others], "limit": 50})
        assert _same_keys(passed, _fixture_body("system-activity-timeout-pass")) == []
        assert [(r["outcome"], r.get("has_retry"), r.get("reason")) for r in passed["results"]] == [
            ("enforced", True, None), ("skipped", None, "not_expired")]


def test_namespace_and_schedule_bodies_have_the_fixture_shapes(raw: Raw) -> None:
    answers: Dict[str, Any] = {
        "namespace-create": raw.ok("POST", "/namespaces", {"name": "billing", "description": "Billing workflows",
                                                          "retention_days": 90}),
        "namespace-describe": raw.ok("GET", "/namespaces/billing"),
        "namespace-list": raw.ok("GET", "/namespaces"),
        "namespace-update": raw.ok("PUT", "/namespaces/billing", {"retention_days": 120}),
    }
    answers["namespace-delete"] = raw.ok("DELETE", "/namespaces/billing")
    action = {"workflow_type": "inventory.check", "task_queue": "inventory-standard",
              "input": envelope([{"warehouse": "west-1", "threshold": 25}]),
              "execution_timeout_seconds": 900, "run_timeout_seconds": 600}
    answers["schedule-create"] = raw.ok("POST", "/schedules", {
        "schedule_id": "daily-inventory-check", "spec": {"cron_expressions": ["15 7 * * *"], "timezone": "UTC"},
        "action": action, "overlap_policy": "buffer_one", "jitter_seconds": 45, "max_runs": 30, "paused": True,
        "note": "created from parity fixture", "memo": {"team": "orders"},
        "search_attributes": {"CustomerTier": "enterprise"}})
    answers["schedule-describe"] = raw.ok("GET", "/schedules/daily-inventory-check")
    answers["schedule-list"] = raw.ok("GET", "/schedules")
    answers["schedule-resume"] = raw.ok("POST", "/schedules/daily-inventory-check/resume", {"note": "go"})
    answers["schedule-pause"] = raw.ok("POST", "/schedules/daily-inventory-check/pause", {"note": "stop"})
    raw.ok("POST", "/schedules/daily-inventory-check/resume", {})
    answers["schedule-trigger"] = raw.ok("POST", "/schedules/daily-inventory-check/trigger",
                                         {"overlap_policy": "allow_all"})
    answers["schedule-update"] = raw.ok("PUT", "/schedules/daily-inventory-check",
                                        {"spec": {"intervals": [{"every": "PT30M"}]}, "overlap_policy": "skip"})
    raw.ok("POST", f"/workflows/{answers['schedule-trigger']['workflow_id']}/terminate", {})
    answers["schedule-backfill"] = raw.ok("POST", "/schedules/daily-inventory-check/backfill", {
        "start_time": "2026-04-20T00:00:00Z", "end_time": "2026-04-20T03:00:00Z", "overlap_policy": "buffer_all"})
    answers["schedule-history"] = raw.ok("GET", "/schedules/daily-inventory-check/history?limit=2&after_sequence=4")
    answers["schedule-delete"] = raw.ok("DELETE", "/schedules/daily-inventory-check")
    for name, ours in answers.items():
        assert _same_keys(ours, _fixture_body(name)) == [], name
    backfill = answers["schedule-backfill"]
    assert backfill["fires_attempted"] == 6
    assert [r["outcome"] for r in backfill["results"][:2]] == ["triggered", "buffered"]
    assert backfill["results"][1]["buffer_depth"] == 1
    assert answers["schedule-history"]["has_more"] is True and answers["schedule-history"]["next_cursor"] == 6
    assert [e["event_type"] for e in answers["schedule-history"]["events"]] == ["ScheduleTriggered", "ScheduleUpdated"]
