"""The dev server's worker-session routes and pinned routing, over real sockets (protocol §3.4).

Outcomes and refusal reasons are the schema's (``worker-sessions-runtime.schema.json``,
``workerSessionOperationResult``): every refusal is a 4xx with ``admitted: false``, its
``status`` and a ``reason`` from that enum; bad input never gets a 5xx.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sync_worker.devserver import DevServer
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import Raw

REASONS = {"invalid_worker_session", "worker_not_registered", "session_queue_mismatch", "session_not_found",
           "session_not_active", "session_owner_mismatch", "session_missing", "session_requirements_not_met",
           "worker_session_limit_exceeded", "session_owned_by_another_worker", "session_activity_limit_exceeded",
           "session_closed", "session_reacquire_disallowed"}


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    with DevServer(workflow_task_lease_seconds=30) as srv:
        yield srv


@pytest.fixture
def raw(server: DevServer) -> Raw:
    return Raw(server.url)


_COUNTER = [0]


def _unique(prefix: str) -> str:
    _COUNTER[0] += 1
    return f"{prefix}-{_COUNTER[0]}-{time.monotonic_ns() % 10**8}"


def _register(raw: Raw, worker_id: str, queue: str = "q", capabilities: Optional[List[str]] = None,
              sessions: Optional[int] = None, activities: Optional[List[str]] = None) -> None:
    body: Dict[str, Any] = {"worker_id": worker_id, "task_queue": queue, "capabilities": capabilities or [],
                            "supported_workflow_types": ["t"], "supported_activity_types": activities or ["a"]}
    if sessions is not None:
        body["max_concurrent_worker_sessions"] = sessions
    raw.ok("POST", "/worker/register", body, plane="worker")


def _create(raw: Raw, worker_id: str, session_id: str, **options: Any) -> Any:
    return raw.call("POST", "/worker/sessions", {"worker_id": worker_id, "session_id": session_id, **options},
                    plane="worker")


def _refusal(resp: Any, status: int, reason: str) -> Dict[str, Any]:
    assert resp.status_code == status, (resp.status_code, resp.text)
    body = resp.json()
    assert body["reason"] == reason and body["admitted"] is False and body["status"] == status, body
    assert reason in REASONS
    return dict(body)


def test_create_reuse_renew_close_and_refusals(raw: Raw) -> None:
    one, two, sid = _unique("w1"), _unique("w2"), _unique("s")
    _register(raw, one)
    _register(raw, two)
    created = _create(raw, one, sid, lease_seconds=30).json()
    assert created["admitted"] is True and created["outcome"] == "created" and created["reason"] is None
    snap = created["session"]
    assert (snap["status"], snap["lease_owner"], snap["lease_seconds"], snap["max_concurrent_activities"]) == \
        ("active", one, 30, 1)
    assert snap["holder"]["worker_id"] == one and snap["holder"]["is_stale"] is False
    assert _create(raw, one, sid).json()["outcome"] == "reused"
    _refusal(_create(raw, two, sid), 409, "session_owned_by_another_worker")

    beat = raw.call("POST", f"/worker/sessions/{sid}/heartbeat", {"worker_id": one, "lease_seconds": 60},
                    plane="worker")
    assert beat.status_code == 200 and beat.json()["outcome"] == "heartbeat_recorded"
    assert beat.json()["session"]["last_heartbeat_at"] is not None
    _refusal(raw.call("POST", f"/worker/sessions/{sid}/heartbeat", {"worker_id": two}, plane="worker"), 409,
             "session_owner_mismatch")
    _refusal(raw.call("POST", f"/worker/sessions/{sid}/heartbeat", {"worker_id": one, "lease_seconds": 0},
                      plane="worker"), 422, "invalid_worker_session")
    _refusal(raw.call("POST", "/worker/sessions/nope/heartbeat", {"worker_id": one}, plane="worker"), 404,
             "session_not_found")

    closed = raw.call("DELETE", f"/worker/sessions/{sid}", {"worker_id": one, "reason": "worker_shutdown"},
                      plane="worker")
    assert closed.status_code == 200 and closed.json()["outcome"] == "closed"
    assert closed.json()["session"]["status"] == "closed" and closed.json()["session"]["closed_at"]
    again = raw.call("DELETE", f"/worker/sessions/{sid}", {"worker_id": one}, plane="worker")
    assert again.json()["outcome"] == "already_closed"
    _refusal(_create(raw, one, sid), 409, "session_closed")  # explicit close is terminal for the id
    _refusal(raw.call("POST", f"/worker/sessions/{sid}/heartbeat", {"worker_id": one}, plane="worker"), 409,
             "session_not_active")


def test_admission_refusals(raw: Raw) -> None:
    gpu, plain, single = _unique("gpu"), _unique("plain"), _unique("single")
    _register(raw, gpu, capabilities=["gpu:l4"])
    _register(raw, plain)
    _register(raw, single, sessions=1)
    _refusal(_create(raw, _unique("ghost"), _unique("s")), 412, "worker_not_registered")
    body = _refusal(_create(raw, plain, _unique("s"), requirements=["gpu:l4", "fs:/models"]), 409,
                    "session_requirements_not_met")
    assert body["missing_requirements"] == ["gpu:l4", "fs:/models"]
    assert _create(raw, gpu, _unique("s"), requirements=["gpu:l4"]).status_code == 200
    _refusal(_create(raw, plain, _unique("s"), queue="elsewhere"), 409, "session_queue_mismatch")
    _refusal(_create(raw, plain, _unique("s"), create_if_missing=False), 404, "session_missing")
    assert _create(raw, single, _unique("s")).status_code == 200
    body = _refusal(_create(raw, single, _unique("s")), 409, "worker_session_limit_exceeded")
    assert body["max_concurrent_worker_sessions"] == 1


@pytest.mark.parametrize("body", [
    {"session_id": ""}, {"session_id": "x" * 256}, {"session_id": 5}, {},
    {"session_id": "s", "lease_seconds": 0}, {"session_id": "s", "ttl_seconds": "9"},
    {"session_id": "s", "max_concurrent_activities": True}, {"session_id": "s", "requirements": "gpu"},
    {"session_id": "s", "requirements": [""]}, {"session_id": "s", "create_if_missing": "yes"},
    {"session_id": "s", "queue": ""},
])
def test_bad_options_are_422_naming_the_field(raw: Raw, body: Dict[str, Any]) -> None:
    worker = _unique("w")
    _register(raw, worker)
    resp = raw.call("POST", "/worker/sessions", {"worker_id": worker, **body}, plane="worker")
    refused = _refusal(resp, 422, "invalid_worker_session")
    assert refused["errors"]


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                  max_size=3), max_leaves=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.dictionaries(st.sampled_from(["worker_id", "session_id", "lease_seconds", "ttl_seconds", "requirements",
                                             "queue", "create_if_missing", "max_concurrent_activities", "reason"]),
                            _JSON, max_size=6) | _JSON,
       route=st.sampled_from(["create", "heartbeat", "close"]))
def test_fuzzed_session_requests_never_5xx(raw: Raw, body: Any, route: str) -> None:
    method, path = {"create": ("POST", "/worker/sessions"), "heartbeat": ("POST", "/worker/sessions/fz/heartbeat"),
                    "close": ("DELETE", "/worker/sessions/fz")}[route]
    resp = raw.call(method, path, body, plane="worker")
    assert resp.status_code < 500, (resp.status_code, resp.text)
    if resp.status_code >= 400:
        assert resp.json().get("reason")


def test_a_lapsed_lease_expires_and_is_reacquired_or_refused(raw: Raw) -> None:
    one, two = _unique("w1"), _unique("w2")
    _register(raw, one)
    _register(raw, two)
    free, fixed = _unique("s"), _unique("s")
    assert _create(raw, one, free, lease_seconds=1).status_code == 200
    assert _create(raw, one, fixed, lease_seconds=1, allow_reacquire_after_failure=False).status_code == 200
    time.sleep(1.3)  # the scheduler's tick expires both leases
    beat = raw.call("POST", f"/worker/sessions/{free}/heartbeat", {"worker_id": one}, plane="worker")
    body = _refusal(beat, 409, "session_not_active")
    assert body["session"]["status"] == "expired" and body["session"]["failure_reason"] == "lease_expired"
    taken = _create(raw, two, free)
    assert taken.json()["outcome"] == "reacquired" and taken.json()["session"]["lease_owner"] == two
    _refusal(_create(raw, two, fixed), 409, "session_reacquire_disallowed")


def _schedule(raw: Raw, queue: str, worker_id: str, session: Dict[str, Any]) -> str:
    workflow_id = _unique("wf")
    raw.ok("POST", "/workflows", {"workflow_id": workflow_id, "workflow_type": "t", "task_queue": queue,
                                  "input": envelope([])})
    task = raw.poll(queue=queue, worker_id=worker_id)
    resp = raw.complete(task, [{"type": "schedule_activity", "activity_type": "a", "arguments": envelope([]),
                                "queue": queue, "worker_session": session}])
    assert resp.status_code == 200, resp.text
    return workflow_id


def test_pinned_activities_go_only_to_the_holder(raw: Raw) -> None:
    queue = _unique("q")
    one, two, sid = _unique("w1"), _unique("w2"), _unique("s")
    _register(raw, one, queue=queue)
    _register(raw, two, queue=queue)
    assert _create(raw, one, sid).status_code == 200
    workflow_id = _schedule(raw, queue, two, {"session_id": sid})
    scheduled = [e for e in raw.history(workflow_id) if e["event_type"] == "ActivityScheduled"]
    assert scheduled[0]["payload"]["worker_session"]["session_id"] == sid
    assert raw.poll(queue=queue, worker_id=two, kind="activity", timeout=0) is None
    task = raw.poll(queue=queue, worker_id=one, kind="activity", timeout=0)
    assert task is not None and task["worker_session"]["session_id"] == sid
    assert task["worker_session"]["lease_owner"] == one and task["worker_session"]["status"] == "active"
    # an activity heartbeat renews the session and reports it
    beat = raw.ok("POST", f"/worker/activity-tasks/{task['task_id']}/heartbeat",
                  {"activity_attempt_id": task["activity_attempt_id"], "lease_owner": one}, plane="worker")
    assert beat["worker_session"]["lease_owner"] == one


def test_lazy_creation_by_the_first_capable_poller_and_the_session_activity_limit(raw: Raw) -> None:
    queue = _unique("q")
    plain, gpu, sid = _unique("plain"), _unique("gpu"), _unique("s")
    _register(raw, plain, queue=queue)
    _register(raw, gpu, queue=queue, capabilities=["gpu:l4"])
    session = {"session_id": sid, "requirements": ["gpu:l4"]}
    _schedule(raw, queue, plain, session)
    _schedule(raw, queue, plain, session)
    assert raw.poll(queue=queue, worker_id=plain, kind="activity", timeout=0) is None  # lacks the requirement
    first = raw.poll(queue=queue, worker_id=gpu, kind="activity", timeout=0)
    assert first is not None and first["worker_session"]["lease_owner"] == gpu  # created for it on admission
    # max_concurrent_activities 1: the session's second activity waits until the first ends
    assert raw.poll(queue=queue, worker_id=gpu, kind="activity", timeout=0) is None
    raw.ok("POST", f"/worker/activity-tasks/{first['task_id']}/complete",
           {"activity_attempt_id": first["activity_attempt_id"], "lease_owner": gpu, "result": envelope(1)},
           plane="worker")
    assert raw.poll(queue=queue, worker_id=gpu, kind="activity", timeout=0) is not None


def test_a_bad_worker_session_command_is_refused_and_changes_nothing(raw: Raw) -> None:
    queue, worker = _unique("q"), _unique("w")
    _register(raw, worker, queue=queue)
    workflow_id = _unique("wf")
    raw.ok("POST", "/workflows", {"workflow_id": workflow_id, "workflow_type": "t", "task_queue": queue,
                                  "input": envelope([])})
    task = raw.poll(queue=queue, worker_id=worker)
    resp = raw.complete(task, [{"type": "schedule_activity", "activity_type": "a", "arguments": envelope([]),
                                "worker_session": {"session_id": " ", "lease_seconds": 3}}])
    assert resp.status_code == 422 and "commands.0.worker_session.session_id" in resp.json()["errors"]
    assert "ActivityScheduled" not in raw.types(workflow_id)


def test_deregistering_the_holder_orphans_its_session_and_fails_what_cannot_be_reacquired(raw: Raw) -> None:
    queue = _unique("q")
    holder, other, sid = _unique("h"), _unique("o"), _unique("s")
    _register(raw, holder, queue=queue)
    _register(raw, other, queue=queue)
    assert _create(raw, holder, sid, allow_reacquire_after_failure=False).status_code == 200
    workflow_id = _schedule(raw, queue, other, {"session_id": sid, "allow_reacquire_after_failure": False})
    raw.ok("DELETE", f"/worker/registrations/{holder}", plane="worker")
    deadline = time.monotonic() + 5
    while "ActivityFailed" not in raw.types(workflow_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    failed = next(e for e in raw.history(workflow_id) if e["event_type"] == "ActivityFailed")["payload"]
    assert failed["code"] == "session_reacquire_disallowed" and failed["exception_type"] == "WorkerSessionLost"
    assert failed["non_retryable"] is True and failed["failure_category"] == "internal"
    assert raw.poll(queue=queue, worker_id=other, kind="activity", timeout=0) is None
