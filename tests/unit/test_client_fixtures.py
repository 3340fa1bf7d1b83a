"""Every control-plane fixture, end to end through our Client (``responses`` plays the server).

For each ``fixtures/sdk-python/tests/fixtures/control-plane/*.json`` of a control-plane
operation, the fixture's ``sdk_python`` arguments go into the same-named method of
:class:`sync_worker.Client`, and the test checks

* the request: method, path, query and body exactly as the fixture's ``request`` (and
  ``sdk_python.expected_body``), with payload fields decoded from Avro to the fixture's values;
* the fixture's ``semantic_body``: built from what our Client returned for the fixture's
  ``response_body`` (and, where the semantic names request facts, from the request we sent).

The fixtures are read at run time from ``../shared/fixtures``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional
from urllib.parse import parse_qsl, urlsplit

import pytest
import responses

from sync_worker import payloads
from sync_worker.client import Client, ScheduleAction, ScheduleSpec
from tests._fixtures import fixture_paths, load_fixture

BASE = "http://dw.test"
FOLDER = "sdk-python/tests/fixtures/control-plane"
WORKER_PLANE = ("workflow-task.", "query-task.", "activity.", "worker.register")


@dataclass
class Sent:
    method: str
    path: str
    params: Dict[str, str]
    headers: Dict[str, str]
    body: Any  # JSON, payload envelopes decoded


def _decode_payloads(value: Any) -> Any:
    if isinstance(value, dict):
        if payloads.is_envelope(value):
            return payloads.decode_envelope(value)
        return {k: _decode_payloads(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_payloads(v) for v in value]
    return value


def _arguments(fixture: Dict[str, Any]) -> Dict[str, Any]:
    sdk = fixture["sdk_python"]
    return {**(sdk.get("args") or {}), **(sdk.get("kwargs") or {})}


def _schedule_kwargs(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(kwargs)
    if "spec" in out:
        out["spec"] = ScheduleSpec(**out["spec"])
    if "action" in out:
        out["action"] = ScheduleAction(**out["action"])
    return out


def _positional(method: str, *names: str) -> Callable[[Client, Dict[str, Any]], Any]:
    """Call ``method`` with ``names`` positionally (as the SDK's signature has them) and the rest by keyword."""
    def call(client: Client, kwargs: Dict[str, Any]) -> Any:
        rest = dict(kwargs)
        args = [rest.pop(name) for name in names]
        return getattr(client, method)(*args, **rest)
    return call


# operation -> how our Client is called with the fixture's sdk_python arguments
CALLS: Dict[str, Callable[[Client, Dict[str, Any]], Any]] = {
    "namespace.create": _positional("create_namespace", "name"),
    "namespace.delete": _positional("delete_namespace", "name"),
    "namespace.describe": _positional("describe_namespace", "name"),
    "namespace.list": _positional("list_namespaces"),
    "namespace.update": _positional("update_namespace", "name"),
    "namespace.set_storage_driver": _positional("set_namespace_external_storage", "name"),
    "storage.test": _positional("test_external_storage"),
    "search_attribute.create": _positional("create_search_attribute", "name", "attribute_type"),
    "search_attribute.delete": _positional("delete_search_attribute", "name"),
    "search_attribute.list": _positional("list_search_attributes"),
    "schedule.create": lambda c, kw: c.create_schedule(**_schedule_kwargs(kw)),
    "schedule.update": lambda c, kw: _positional("update_schedule", "schedule_id")(c, _schedule_kwargs(kw)),
    "schedule.describe": _positional("describe_schedule", "schedule_id"),
    "schedule.list": _positional("list_schedules"),
    "schedule.delete": _positional("delete_schedule", "schedule_id"),
    "schedule.pause": _positional("pause_schedule", "schedule_id"),
    "schedule.resume": _positional("resume_schedule", "schedule_id"),
    "schedule.trigger": _positional("trigger_schedule", "schedule_id"),
    "schedule.backfill": _positional("backfill_schedule", "schedule_id"),
    "schedule.history": _positional("get_schedule_history", "schedule_id"),
    "system.repair.status": _positional("repair_status"),
    "system.repair.pass": _positional("repair_pass"),
    "system.retention.status": _positional("retention_status"),
    "system.retention.pass": _positional("retention_pass"),
    "system.activity_timeout.status": _positional("activity_timeout_status"),
    "system.activity_timeout.pass": _positional("activity_timeout_pass"),
    "task_queue.list": _positional("list_task_queues"),
    "task_queue.describe": _positional("describe_task_queue", "name"),
    "task_queue.build_ids": _positional("list_task_queue_build_ids", "task_queue"),
    "task_queue.build_id.drain": _positional("drain_task_queue_build_id", "task_queue", "build_id"),
    "task_queue.build_id.promote": _positional("promote_task_queue_build_id", "task_queue", "build_id"),
    "task_queue.build_id.resume": _positional("resume_task_queue_build_id", "task_queue", "build_id"),
    "worker.list": _positional("list_workers"),
    "worker.describe": _positional("describe_worker", "worker_id"),
    "worker.deregister": _positional("deregister_worker", "worker_id"),
    "workflow.start": lambda c, kw: c.start_workflow(**kw),
    "workflow.describe": _positional("describe_workflow", "workflow_id"),
    "workflow.list": _positional("list_workflows"),
    "workflow.list_runs": _positional("list_workflow_runs", "workflow_id"),
    "workflow.show_run": _positional("describe_workflow_run", "workflow_id", "run_id"),
    "workflow.history": _positional("get_history", "workflow_id", "run_id"),
    "workflow.history_export": _positional("export_history", "workflow_id", "run_id"),
    "workflow.signal": _positional("signal_workflow", "workflow_id", "signal_name"),
    "workflow.query": _positional("query_workflow", "workflow_id", "query_name"),
    "workflow.update": _positional("update_workflow", "workflow_id", "update_name"),
    "workflow.cancel": _positional("cancel_workflow", "workflow_id"),
    "workflow.terminate": _positional("terminate_workflow", "workflow_id"),
    "workflow.repair": _positional("repair_workflow", "workflow_id"),
    "workflow.archive": _positional("archive_workflow", "workflow_id"),
    "bridge.webhook": _positional("send_webhook_bridge_event", "adapter"),
}


def _ns(sent: Sent) -> str:
    return sent.headers["X-Namespace"]


def _namespace_view(r: Any) -> Dict[str, Any]:
    return {"name": r.name, "description": r.description, "retention_days": r.retention_days, "status": r.status}


def _rollout_view(r: Any, sent: Sent) -> Dict[str, Any]:
    view = {"namespace": r.namespace, "task_queue": r.task_queue, "build_id": r.build_id,
            "drain_intent": r.drain_intent, "drained_at": r.drained_at}
    if r.promoted_at is not None:
        view.update(promoted_at=r.promoted_at, new_start_selected=r.new_start_selected)
    return view


def _ids(results: List[Dict[str, Any]], key: str, outcome: str) -> List[str]:
    return [item[key] for item in results if item.get("outcome") == outcome]


def _admission(r: Any, kind: str) -> Optional[str]:
    return getattr(r.admission, kind).status


# operation -> the fixture's semantic_body, rebuilt from our result (and the request we sent)
SEMANTICS: Dict[str, Callable[[Any, Sent], Dict[str, Any]]] = {
    "namespace.create": lambda r, s: _namespace_view(r),
    "namespace.describe": lambda r, s: _namespace_view(r),
    "namespace.update": lambda r, s: _namespace_view(r),
    "namespace.delete": lambda r, s: {"name": r.name, "status": r.status, "deleted_keys": list(r.deleted)},
    "namespace.list": lambda r, s: {
        "namespace_names": [n.name for n in r.namespaces],
        "retention_days": {n.name: n.retention_days for n in r.namespaces},
        "statuses": {n.name: n.status for n in r.namespaces}},
    "namespace.set_storage_driver": lambda r, s: {
        "namespace": r.name, **{k: r.external_payload_storage[k] for k in ("driver", "enabled", "threshold_bytes")},
        **{k: r.external_payload_storage["config"][k] for k in ("disk", "bucket", "prefix")}},
    "storage.test": lambda r, s: {
        "status": r.status, "namespace": r.namespace, "driver": r.driver,
        "small_payload_bytes": r.small_payload.bytes, "large_payload_bytes": r.large_payload.bytes,
        "large_payload_reference_uri": r.large_payload.reference_uri},
    "search_attribute.create": lambda r, s: {"name": r["name"], "type": r["type"]},
    "search_attribute.delete": lambda r, s: {"name": r["name"], "outcome": r["outcome"]},
    "search_attribute.list": lambda r, s: {"system_attributes": r.system_attributes,
                                           "custom_attributes": r.custom_attributes},
    "schedule.create": lambda r, s: {
        "namespace": _ns(s), "schedule_id": r.schedule_id, "workflow_type": s.body["action"]["workflow_type"],
        "task_queue": s.body["action"]["task_queue"], "overlap_policy": s.body["overlap_policy"],
        "outcome": "created"},
    "schedule.update": lambda r, s: {
        "namespace": _ns(s), "schedule_id": s.path.rsplit("/", 1)[-1],
        "workflow_type": s.body["action"]["workflow_type"], "task_queue": s.body["action"]["task_queue"],
        "overlap_policy": s.body["overlap_policy"], "outcome": "updated"},
    "schedule.describe": lambda r, s: {
        "namespace": r["namespace"], "schedule_id": r.schedule_id, "workflow_type": r.action["workflow_type"],
        "task_queue": r.action["task_queue"], "status": r.status, "overlap_policy": r.overlap_policy,
        "fires_count": r.fires_count, "remaining_actions": r.remaining_actions},
    "schedule.list": lambda r, s: {
        "namespace": _ns(s), "schedule_ids": [x.schedule_id for x in r.schedules],
        "workflow_types": [x.action["workflow_type"] for x in r.schedules],
        "statuses": {x.schedule_id: x.status for x in r.schedules}, "next_page_token": r.next_page_token},
    "schedule.delete": lambda r, s: {"namespace": _ns(s), "schedule_id": s.path.rsplit("/", 1)[-1],
                                     "outcome": "deleted"},
    "schedule.pause": lambda r, s: {"namespace": _ns(s), "schedule_id": s.path.split("/")[-2], "outcome": "paused",
                                    "note": s.body["note"]},
    "schedule.resume": lambda r, s: {"namespace": _ns(s), "schedule_id": s.path.split("/")[-2],
                                     "outcome": "resumed", "note": s.body["note"]},
    "schedule.trigger": lambda r, s: {"namespace": r["namespace"], "schedule_id": r.schedule_id,
                                      "outcome": r.outcome, "workflow_id": r.workflow_id, "run_id": r.run_id},
    "schedule.backfill": lambda r, s: {"namespace": r["namespace"], "schedule_id": r.schedule_id,
                                       "outcome": r.outcome, "fires_attempted": r.fires_attempted},
    "schedule.history": lambda r, s: {
        "namespace": r.namespace, "schedule_id": r.schedule_id, "event_types": [e.event_type for e in r.events],
        "sequences": [e.sequence for e in r.events],
        "workflow_refs": {str(e.sequence): {"workflow_instance_id": e.workflow_instance_id,
                                            "workflow_run_id": e.workflow_run_id}
                          for e in r.events if e.workflow_instance_id},
        "has_more": r.has_more, "next_cursor": r.next_cursor},
    "system.repair.status": lambda r, s: {
        "namespace": _ns(s), **{k: r["candidates"][k] for k in (
            "total_candidates", "existing_task_candidates", "missing_task_candidates", "scan_pressure")},
        "scan_limit": r["policy"]["scan_limit"], "scan_strategy": r["policy"]["scan_strategy"],
        "scope_keys": [x["scope_key"] for x in r["candidates"]["scopes"]]},
    "system.repair.pass": lambda r, s: {
        "namespace": _ns(s), "instance_id": s.body["instance_id"], **{k: r[k] for k in (
            "repaired_existing_tasks", "repaired_missing_tasks", "dispatched_tasks",
            "selected_existing_task_candidates", "selected_missing_task_candidates", "existing_task_failures",
            "missing_run_failures")}},
    "system.retention.status": lambda r, s: dict(r),
    "system.retention.pass": lambda r, s: {
        "namespace": _ns(s), **{k: r[k] for k in ("processed", "pruned", "skipped", "failed")},
        "pruned_run_ids": _ids(r["results"], "run_id", "pruned"),
        "skipped_run_ids": _ids(r["results"], "run_id", "skipped")},
    "system.activity_timeout.status": lambda r, s: dict(r),
    "system.activity_timeout.pass": lambda r, s: {
        **{k: r[k] for k in ("processed", "enforced", "skipped", "failed")},
        "enforced_execution_ids": _ids(r["results"], "execution_id", "enforced"),
        "skipped_execution_ids": _ids(r["results"], "execution_id", "skipped")},
    "task_queue.list": lambda r, s: {
        "namespace": r.namespace, "task_queue_names": [q.name for q in r.task_queues],
        "workflow_admission_statuses": {q.name: _admission(q, "workflow_tasks") for q in r.task_queues}},
    "task_queue.describe": lambda r, s: {
        "namespace": r.namespace, "task_queue": r.name,
        "workflow_admission_status": _admission(r, "workflow_tasks"),
        "activity_admission_status": _admission(r, "activity_tasks"),
        "query_admission_status": _admission(r, "query_tasks"),
        "active_pollers": r.stats["pollers"]["active_count"],
        "current_lease_ids": [lease["task_id"] for lease in r.current_leases]},
    "task_queue.build_ids": lambda r, s: {
        "namespace": r.namespace, "task_queue": r.task_queue, "build_ids": [c.build_id for c in r.build_ids],
        "rollout_statuses": {c.build_id or "unversioned": c.rollout_status for c in r.build_ids}},
    "task_queue.build_id.drain": _rollout_view,
    "task_queue.build_id.promote": _rollout_view,
    "task_queue.build_id.resume": _rollout_view,
    "worker.list": lambda r, s: {"namespace": r.namespace, "worker_ids": [w.worker_id for w in r.workers],
                                 "task_queue": s.params["task_queue"], "status": s.params["status"]},
    "worker.describe": lambda r, s: {k: getattr(r, k) for k in ("worker_id", "namespace", "task_queue", "runtime",
                                                                "status")},
    "worker.deregister": lambda r, s: dict(r),
    "workflow.start": lambda r, s: {
        **{k: s.body[k] for k in ("workflow_type", "workflow_id", "task_queue", "input", "memo",
                                  "search_attributes", "execution_timeout_seconds", "run_timeout_seconds",
                                  "duplicate_policy")}},
    "workflow.describe": lambda r, s: {"workflow_id": r.workflow_id},
    "workflow.list": lambda r, s: {
        "workflow_type": s.params["workflow_type"], "status": s.params["status"], "query": s.params["query"],
        "page_size": int(s.params["page_size"]), "workflow_ids": [e.workflow_id for e in r.executions],
        "next_page_token": r.next_page_token},
    "workflow.list_runs": lambda r, s: {"workflow_id": r.workflow_id, "run_count": r.run_count,
                                        "run_ids": [x.run_id for x in r.runs]},
    "workflow.show_run": lambda r, s: {"workflow_id": r.workflow_id, "run_id": r.run_id},
    "workflow.history": lambda r, s: {"workflow_id": r["workflow_id"], "run_id": r["run_id"]},
    "workflow.history_export": lambda r, s: {
        "workflow_id": r["workflow"]["instance_id"], "run_id": r["workflow"]["run_id"], "schema": r["schema"],
        "event_count": len(r["history_events"])},
    "workflow.signal": lambda r, s: {"workflow_id": s.path.split("/")[2], "signal_name": s.path.split("/")[-1],
                                     "input": s.body["input"]},
    "workflow.query": lambda r, s: {"workflow_id": s.path.split("/")[2], "query_name": s.path.split("/")[-1],
                                    "input": s.body["input"]},
    "workflow.update": lambda r, s: {"workflow_id": s.path.split("/")[2], "update_name": s.path.split("/")[-1],
                                     "wait_for": s.body["wait_for"], "input": s.body["input"]},
    "workflow.cancel": lambda r, s: {"workflow_id": s.path.split("/")[2], "reason": s.body["reason"]},
    "workflow.terminate": lambda r, s: {"workflow_id": s.path.split("/")[2], "reason": s.body["reason"]},
    "workflow.repair": lambda r, s: {"workflow_id": r.workflow_id},
    "workflow.archive": lambda r, s: {"workflow_id": r.workflow_id, "reason": s.body["reason"]},
    "bridge.webhook": lambda r, s: {
        "adapter": r.adapter, **{k: s.body[k] for k in ("action", "idempotency_key", "target", "input", "correlation")},
        "accepted": r.accepted, "outcome": r.outcome, "workflow_id": r.workflow_id, "run_id": r.run_id},
}

_GENERATED = ("request_id",)  # keys our Client adds per call (a fresh command key)


def _control_fixtures() -> List[Any]:
    out = []
    for path in fixture_paths(FOLDER, "*-parity.json"):
        operation = json.loads(path.read_text(encoding="utf-8"))["operation"]
        if not operation.startswith(WORKER_PLANE):
            out.append(pytest.param(path.name, id=operation))
    return out


def test_every_control_plane_operation_is_covered() -> None:
    operations = {p.id for p in _control_fixtures()}
    assert operations, "no control-plane fixtures found"
    assert operations == set(CALLS) == set(SEMANTICS)


@pytest.mark.parametrize("name", _control_fixtures())
@responses.activate
def test_fixture_request_and_semantics(name: str) -> None:
    fixture = load_fixture(f"{FOLDER}/{name}")
    operation, request = fixture["operation"], fixture["request"]
    client = Client(BASE, token="fixture-token", namespace="orders-prod", transport_retries=1,
                    control_plane_transport="requests")  # responses plays the server
    responses.get(f"{BASE}/api/cluster/info", json={"control_plane": {"version": "2", "request_contract": {
        "operations": {"update": {"fields": {"wait_for": {"canonical_values": ["accepted", "completed"]}}}}}}})
    reply = fixture.get("response_body")
    if operation == "workflow.start":
        reply = {"workflow_id": fixture["semantic_body"]["workflow_id"], "run_id": "run-1",
                 "workflow_type": fixture["semantic_body"]["workflow_type"]}
    responses.add(request["method"], f"{BASE}/api{request['path']}", json=reply if reply is not None else {})

    result = CALLS[operation](client, _arguments(fixture))

    calls = [c for c in responses.calls if not c.request.url.endswith("/cluster/info")]
    assert len(calls) == 1
    raw = calls[0].request
    url = urlsplit(raw.url)
    body = json.loads(raw.body) if raw.body else None
    sent = Sent(method=raw.method, path=url.path[len("/api"):], params=dict(parse_qsl(url.query)),
                headers=dict(raw.headers), body=_decode_payloads(body))
    assert (sent.method, sent.path) == (request["method"], request["path"])
    assert sent.headers["Authorization"] == "Bearer fixture-token"
    assert sent.headers["X-Durable-Workflow-Control-Plane-Version"] == "2"
    if "query" in request:
        assert sent.params == request["query"]
    if request["method"] in ("GET", "DELETE"):
        assert body is None
    if "body" in request:
        assert sent.body == request["body"]
    expected = fixture["sdk_python"].get("expected_body")
    if expected is not None:
        envelope_field = (fixture["sdk_python"].get("payload_envelope") or {}).get("field")
        comparable = {k: v for k, v in body.items() if k not in _GENERATED and k != envelope_field}
        assert comparable == expected
    envelope = fixture["sdk_python"].get("payload_envelope")
    if envelope is not None:
        holder: Any = sent.body
        for part in envelope["field"].split("."):
            holder = holder[part]
        assert holder == envelope["decoded"]
    if operation in ("workflow.signal", "workflow.update"):
        assert isinstance(body["request_id"], str) and body["request_id"]

    assert SEMANTICS[operation](result, sent) == fixture["semantic_body"]
