"""Schedules on the dev server over real sockets: bodies, audit history, overlap policies, jitter,
max runs, cron/interval specs, backfill, and firing on the server's own clock.

The lifecycle tests follow ServerParity ``schedule-manual-lifecycle`` and
``schedule-fixed-rate-one-occurrence`` step by step.
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import datetime, timezone
from typing import Any, Dict, Iterator, List, Optional

import pytest
from cronsim import CronSim

from sync_worker.devserver import DevServer
from sync_worker.payloads import decode_envelope, envelope
from tests.unit.devserver._raw import Raw

INPUT = {"message": "scheduled execution λ", "count": 9007199254740993, "optional": None}


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer(workflow_task_lease_seconds=30, tick_seconds=0.02) as srv:
        yield srv


@pytest.fixture
def raw(server: DevServer) -> Raw:
    return Raw(server.url)


def _body(schedule_id: str, every: str = "P1D", **extra: Any) -> Dict[str, Any]:
    return {"schedule_id": schedule_id, "spec": {"intervals": [{"every": every}], "timezone": "UTC"},
            "action": {"workflow_type": "parity.v1.echo", "task_queue": "sched-q", "input": envelope([INPUT]),
                       "execution_timeout_seconds": 3600, "run_timeout_seconds": 600},
            "overlap_policy": "skip", "jitter_seconds": 0, **extra}


def _audit(raw: Raw, schedule_id: str, limit: int = 2) -> List[Dict[str, Any]]:
    """The whole audit stream, paged ``limit`` at a time (checks the cursor contract on the way)."""
    events: List[Dict[str, Any]] = []
    after: Optional[int] = None
    while True:
        path = f"/schedules/{schedule_id}/history?limit={limit}" + (f"&after_sequence={after}" if after else "")
        page = raw.ok("GET", path)
        assert len(page["events"]) <= limit
        events.extend(page["events"])
        if page["next_cursor"] is None:
            assert page["has_more"] is False
            break
        assert page["has_more"] is True and (after is None or page["next_cursor"] > after)
        after = page["next_cursor"]
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    return events


def _kinds(events: List[Dict[str, Any]]) -> List[str]:
    return [e["event_type"] for e in events]


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _complete_original(raw: Raw, schedule_id: str, workflow_id: str, run_id: str) -> None:
    task = raw.poll(queue="sched-q", worker_id="schedule-worker", timeout=5)
    assert (task["workflow_id"], task["run_id"], task["workflow_type"]) == (workflow_id, run_id, "parity.v1.echo")
    history = raw.ok("GET", f"/workflows/{workflow_id}/runs/{run_id}/history")["events"]
    assert _kinds(history) == ["StartAccepted", "WorkflowStarted", "ScheduleTriggered"]
    marker = history[2]["payload"]
    assert (marker["schedule_id"], marker["trigger_number"]) == (schedule_id, 1)
    assert decode_envelope(history[1]["payload"]["arguments"]) == [INPUT]
    done = raw.complete(task, [{"type": "complete_workflow", "result": envelope(INPUT)}])
    assert done.status_code == 200, done.text
    described = raw.ok("GET", f"/workflows/{workflow_id}/runs/{run_id}")
    assert described["status"] == "completed" and decode_envelope(described["output_envelope"]) == INPUT
    assert described["input"] and described["execution_timeout_seconds"] == 3600


def test_manual_lifecycle(raw: Raw) -> None:
    created = raw.call("POST", "/schedules", _body("manual-original"))
    assert created.status_code == 201
    assert {k: created.json()[k] for k in ("schedule_id", "outcome", "status")} == {
        "schedule_id": "manual-original", "outcome": "created", "status": "active"}
    first = _audit(raw, "manual-original")
    assert _kinds(first) == ["ScheduleCreated"]
    assert first[0]["payload"]["action"]["input"] == envelope([INPUT])

    paused = raw.ok("POST", "/schedules/manual-original/pause", {"note": "operator maintenance window"})
    assert (paused["outcome"], paused["paused"], paused["note"]) == ("paused", True, "operator maintenance window")
    assert raw.ok("GET", "/schedules/manual-original")["status"] == "paused"
    skipped = raw.ok("POST", "/schedules/manual-original/trigger", {})
    assert (skipped["outcome"], skipped["reason"]) == ("skipped", "status_not_triggerable")
    assert skipped.get("workflow_id") is None
    assert raw.poll(queue="sched-q", worker_id="schedule-worker", timeout=0) is None
    before = _audit(raw, "manual-original")
    assert before[2]["event_type"] == "ScheduleTriggerSkipped"
    assert before[2]["payload"]["reason"] == "status_not_triggerable"
    assert before[2]["payload"]["skipped_trigger_count"] == 1

    assert raw.ok("POST", "/schedules/manual-original/resume", {"note": "maintenance complete"})["outcome"] == "resumed"
    triggered = raw.ok("POST", "/schedules/manual-original/trigger", {})
    assert triggered["outcome"] == "triggered" and triggered["workflow_id"] != "manual-original"
    _complete_original(raw, "manual-original", triggered["workflow_id"], triggered["run_id"])
    active = raw.ok("GET", "/schedules/manual-original")
    assert (active["status"], active["fires_count"], active["info"]["skipped_trigger_count"]) == ("active", 1, 1)
    assert active["latest_workflow_instance_id"] == triggered["workflow_id"]

    assert raw.ok("DELETE", "/schedules/manual-original")["outcome"] == "deleted"
    for method, path in (("GET", "/schedules/manual-original"), ("POST", "/schedules/manual-original/trigger")):
        refused = raw.call(method, path, {})
        assert (refused.status_code, refused.json()["reason"]) == (404, "schedule_not_found")
    fresh = _audit(raw, "manual-original")
    assert _kinds(fresh) == ["ScheduleCreated", "SchedulePaused", "ScheduleTriggerSkipped", "ScheduleResumed",
                             "ScheduleTriggered", "ScheduleDeleted"]
    assert fresh[:3] == before
    assert fresh[4]["workflow_run_id"] == triggered["run_id"]
    assert fresh[5]["payload"]["reason"] == "deleted" and fresh[5]["payload"]["schedule"]["fires_count"] == 1
    assert raw.poll(queue="sched-q", worker_id="schedule-worker", timeout=0) is None


def test_fixed_rate_one_occurrence_fires_on_the_server_clock_and_exhausts(raw: Raw) -> None:
    raw.ok("POST", "/schedules", _body("fixed-rate-original", "PT2S", max_runs=1))
    occurrence = _audit(raw, "fixed-rate-original")[0]["payload"]["next_fire_at"]
    assert _ts(occurrence) > time.time() - 0.05
    deadline = time.monotonic() + 8
    while "ScheduleTriggered" not in _kinds(events := _audit(raw, "fixed-rate-original")):
        assert time.monotonic() < deadline, "the scheduler never fired the occurrence"
        time.sleep(0.05)
    fired = events[1]
    assert fired["payload"]["occurrence_time"] == occurrence
    assert _ts(fired["recorded_at"]) >= _ts(occurrence)  # never early
    assert _kinds(events) == ["ScheduleCreated", "ScheduleTriggered", "ScheduleDeleted"]
    assert events[2]["payload"]["reason"] == "max_runs_exhausted"
    assert events[2]["payload"]["schedule"]["status"] == "deleted"
    assert events[2]["payload"]["schedule"]["remaining_actions"] == 0
    assert events[2]["payload"]["schedule"]["next_fire_at"] is None
    _complete_original(raw, "fixed-rate-original", fired["workflow_instance_id"], fired["workflow_run_id"])
    time.sleep(4.2)  # two more intervals: nothing else fires
    assert _audit(raw, "fixed-rate-original") == events
    assert raw.poll(queue="sched-q", worker_id="schedule-worker", timeout=0) is None
    assert raw.call("POST", "/schedules/fixed-rate-original/trigger", {}).json()["reason"] == "schedule_not_found"


def test_describe_list_update_and_bodies(raw: Raw) -> None:
    raw.ok("POST", "/schedules", {**_body("rollup"), "spec": {"cron_expressions": ["0 6 * * *"], "timezone": "UTC"},
                                  "memo": {"team": "orders"}, "search_attributes": {"CustomerTier": "enterprise"},
                                  "jitter_seconds": 30, "max_runs": 50, "note": "created"})
    raw.ok("POST", "/schedules", {**_body("refresh", "PT30M"), "overlap_policy": "buffer_one", "paused": True})
    described = raw.ok("GET", "/schedules/rollup")
    for key, value in {"namespace": "default", "status": "active", "paused": False, "overlap_policy": "skip",
                       "memo": {"team": "orders"}, "search_attributes": {"CustomerTier": "enterprise"},
                       "jitter_seconds": 30, "max_runs": 50, "remaining_actions": 50, "fires_count": 0,
                       "failures_count": 0, "note": "created", "last_fired_at": None}.items():
        assert described[key] == value, key
    expected_next = next(CronSim("0 6 * * *", datetime.now(timezone.utc)))
    assert _ts(described["next_fire_at"]) == expected_next.timestamp()
    assert described["info"]["buffered_actions"] == [] and described["info"]["last_skip_reason"] is None

    listed = raw.ok("GET", "/schedules")
    assert [s["schedule_id"] for s in listed["schedules"]] == ["refresh", "rollup"]
    statuses = {s["schedule_id"]: (s["status"], s["workflow_type"], s["next_fire"]) for s in listed["schedules"]}
    assert statuses["refresh"] == ("paused", "parity.v1.echo", None)
    assert [s["schedule_id"] for s in raw.ok("GET", "/schedules?status=paused")["schedules"]] == ["refresh"]
    page = raw.ok("GET", "/schedules?page_size=1")
    assert len(page["schedules"]) == 1 and page["next_page_token"]
    rest = raw.ok("GET", f"/schedules?page_size=1&next_page_token={page['next_page_token']}")
    assert rest["schedules"][0]["schedule_id"] == "rollup" and rest["next_page_token"] is None

    updated = raw.ok("PUT", "/schedules/rollup", {"spec": {"intervals": [{"every": "PT30M"}]},
                                                  "action": {"task_queue": "inventory-priority"},
                                                  "overlap_policy": "allow_all", "note": "tighten"})
    assert updated["outcome"] == "updated"
    after = raw.ok("GET", "/schedules/rollup")
    assert after["action"]["task_queue"] == "inventory-priority"
    assert after["action"]["workflow_type"] == "parity.v1.echo"  # merged, not replaced
    assert after["overlap_policy"] == "allow_all" and _ts(after["next_fire_at"]) % 1800 == 0
    change = _audit(raw, "rollup")[-1]
    assert change["event_type"] == "ScheduleUpdated"
    assert sorted(change["payload"]["fields"]) == ["action", "note", "overlap_policy", "spec"]
    again = raw.call("POST", "/schedules", _body("rollup"))
    assert (again.status_code, again.json()["reason"]) == (409, "schedule_already_exists")


def test_pause_and_resume_are_idempotent(raw: Raw) -> None:
    """Pausing a paused schedule answers ``paused`` and records another ``SchedulePaused`` (the PHP
    controller); resuming an active one answers ``resumed`` and records nothing."""
    raw.ok("POST", "/schedules", _body("twice"))
    assert raw.ok("POST", "/schedules/twice/resume", {})["outcome"] == "resumed"  # active: a no-op
    assert _kinds(_audit(raw, "twice")) == ["ScheduleCreated"]
    assert raw.ok("GET", "/schedules/twice")["status"] == "active"

    first = raw.call("POST", "/schedules/twice/pause", {"note": "first"})
    second = raw.call("POST", "/schedules/twice/pause", {"note": "second"})
    assert (first.status_code, second.status_code) == (200, 200)
    assert (second.json()["outcome"], second.json()["paused"], second.json()["note"]) == ("paused", True, "second")
    assert second.json()["paused_at"] >= first.json()["paused_at"]
    audit = _audit(raw, "twice")
    assert _kinds(audit) == ["ScheduleCreated", "SchedulePaused", "SchedulePaused"]
    assert [e["payload"]["note"] for e in audit[1:]] == ["first", "second"]
    assert raw.ok("GET", "/schedules/twice")["status"] == "paused"

    assert raw.ok("POST", "/schedules/twice/resume", {})["outcome"] == "resumed"
    again = raw.call("POST", "/schedules/twice/resume", {})
    assert (again.status_code, again.json()["outcome"], again.json()["paused"]) == (200, "resumed", False)
    assert _kinds(_audit(raw, "twice")) == ["ScheduleCreated", "SchedulePaused", "SchedulePaused", "ScheduleResumed"]
    assert raw.ok("GET", "/schedules/twice")["status"] == "active"
    raw.ok("DELETE", "/schedules/twice")
    gone = raw.call("POST", "/schedules/twice/pause", {})
    assert (gone.status_code, gone.json()["reason"]) == (404, "schedule_not_found")


@pytest.mark.parametrize("patch, field", [
    ({"spec": None}, "spec"), ({"action": None}, "action"), ({"spec": []}, "spec"), ({"spec": {}}, "spec"),
    ({"spec": {"cron_expressions": ["61 * * * *"]}}, "spec.cron_expressions.0"),
    ({"spec": {"cron_expressions": "* * * * *"}}, "spec.cron_expressions"),
    ({"spec": {"intervals": [{"every": "30 minutes"}]}}, "spec.intervals.0.every"),
    ({"spec": {"intervals": [{"every": "PT0S"}]}}, "spec.intervals.0.every"),
    ({"spec": {"intervals": [{"every": "PT0.5S"}]}}, "spec.intervals.0.every"),
    ({"spec": {"intervals": [{"every": "PT1M", "offset": "soon"}]}}, "spec.intervals.0.offset"),
    ({"spec": {"intervals": [{"every": "PT1M"}], "timezone": "Mars/Olympus"}}, "spec.timezone"),
    ({"action": {"task_queue": "q"}}, "action.workflow_type"),
    ({"action": {"workflow_type": "t", "execution_timeout_seconds": 0}}, "execution_timeout_seconds"),
    ({"overlap_policy": "sometimes"}, "overlap_policy"), ({"jitter_seconds": -1}, "jitter_seconds"),
    ({"jitter_seconds": 1.5}, "jitter_seconds"), ({"max_runs": 0}, "max_runs"), ({"max_runs": True}, "max_runs"),
    ({"memo": [1]}, "memo"), ({"paused": "yes"}, "paused"), ({"note": 5}, "note"),
    ({"schedule_id": "has space"}, "schedule_id"), ({"schedule_id": "x" * 129}, "schedule_id"),
])
def test_bad_bodies_are_422_naming_the_field(raw: Raw, patch: Dict[str, Any], field: str) -> None:
    resp = raw.call("POST", "/schedules", {**_body("bad"), **patch})
    assert resp.status_code == 422, resp.text
    assert resp.json()["reason"] == "validation_failed" and field in resp.json()["errors"]
    assert raw.ok("GET", "/schedules")["schedules"] == []


def test_other_refusals_are_4xx_with_a_reason(raw: Raw) -> None:
    # a plain JSON list is the Durable Workflow CLI's input (stored as Avro); a JSON-tagged payload is refused
    json_input = raw.call("POST", "/schedules", {**_body("j"), "action": {
        "workflow_type": "t", "input": {"codec": "json", "blob": "WzFd"}}})
    assert json_input.status_code == 422 and json_input.json()["reason"] in (
        "invalid_payload_framing", "unsupported_payload_codec", "validation_failed")
    raw.ok("POST", "/schedules", _body("ok"))
    for method, path, body in (
            ("POST", "/schedules/ok/backfill", {"start_time": "yesterday", "end_time": "2026-04-20T03:00:00Z"}),
            ("POST", "/schedules/ok/trigger", {"overlap_policy": "never"}),
            ("PUT", "/schedules/ok", {"spec": {"intervals": [{"every": "nope"}]}}),
            ("GET", "/schedules/ok/history?limit=abc", None), ("GET", "/schedules/ok/history?after_sequence=-1", None),
            ("GET", "/schedules?page_size=x", None), ("GET", "/schedules?query=WorkflowType%3D'x'", None)):
        resp = raw.call(method, path, body)
        assert 400 <= resp.status_code < 500 and isinstance(resp.json()["reason"], str), (path, resp.text)
    backwards = raw.call("POST", "/schedules/ok/backfill", {"start_time": "2026-04-20T03:00:00Z",
                                                            "end_time": "2026-04-20T00:00:00Z"})
    assert (backwards.status_code, backwards.json()["reason"]) == (422, "invalid_time_range")
    assert raw.call("GET", "/schedules/ghost/history").json()["reason"] == "schedule_not_found"


def test_overlap_policies_on_manual_triggers(raw: Raw) -> None:
    def running(schedule_id: str) -> Dict[str, Any]:
        raw.ok("POST", "/schedules", {**_body(schedule_id), "overlap_policy": policy})
        return dict(raw.ok("POST", f"/schedules/{schedule_id}/trigger", {}))

    policy = "skip"
    first = running("s-skip")
    again = raw.ok("POST", "/schedules/s-skip/trigger", {})
    assert (again["outcome"], again["reason"]) == ("skipped", "overlap_policy_skip")
    allowed = raw.ok("POST", "/schedules/s-skip/trigger", {"overlap_policy": "allow_all"})  # one-off override
    assert allowed["outcome"] == "triggered" and allowed["workflow_id"] != first["workflow_id"]

    policy = "terminate_other"
    first = running("s-term")
    second = raw.ok("POST", "/schedules/s-term/trigger", {})
    assert second["outcome"] == "triggered"
    assert raw.ok("GET", f"/workflows/{first['workflow_id']}")["status"] == "terminated"

    policy = "cancel_other"
    first = running("s-cancel")
    raw.ok("POST", "/schedules/s-cancel/trigger", {})
    assert raw.ok("GET", f"/workflows/{first['workflow_id']}")["status"] == "cancelled"

    policy = "buffer_one"
    first = running("s-buffer")
    buffered = raw.ok("POST", "/schedules/s-buffer/trigger", {})
    assert (buffered["outcome"], buffered["buffer_depth"]) == ("buffered", 1)
    full = raw.ok("POST", "/schedules/s-buffer/trigger", {})
    assert full["outcome"] == "buffer_full"
    assert raw.ok("GET", "/schedules/s-buffer")["info"]["buffered_actions"][0]["overlap_policy"] == "buffer_one"
    raw.ok("POST", f"/workflows/{first['workflow_id']}/terminate", {})
    deadline = time.monotonic() + 5
    while raw.ok("GET", "/schedules/s-buffer")["fires_count"] < 2:  # the buffered fire starts once it ended
        assert time.monotonic() < deadline
        time.sleep(0.05)
    described = raw.ok("GET", "/schedules/s-buffer")
    assert described["info"]["buffered_actions"] == []
    assert raw.ok("GET", f"/workflows/{described['latest_workflow_instance_id']}")["status"] == "pending"


def test_backfill_fires_every_occurrence_in_the_window(raw: Raw) -> None:
    raw.ok("POST", "/schedules", {**_body("bf", "PT30M"), "overlap_policy": "allow_all"})
    result = raw.ok("POST", "/schedules/bf/backfill", {"start_time": "2026-04-20T00:00:00Z",
                                                        "end_time": "2026-04-20T03:00:00Z"})
    assert (result["outcome"], result["fires_attempted"]) == ("accepted", 6)
    assert [r["fire_time"][:16] for r in result["results"]] == [
        "2026-04-20T00:00", "2026-04-20T00:30", "2026-04-20T01:00", "2026-04-20T01:30", "2026-04-20T02:00",
        "2026-04-20T02:30"]  # start inclusive, end exclusive
    assert all(r["outcome"] == "triggered" for r in result["results"])
    buffered = raw.ok("POST", "/schedules/bf/backfill", {"start_time": "2026-04-21T00:00:00Z",
                                                          "end_time": "2026-04-21T01:00:00Z",
                                                          "overlap_policy": "buffer_all"})
    assert [r["outcome"] for r in buffered["results"]] == ["buffered", "buffered"]
    assert raw.ok("GET", "/schedules/bf")["fires_count"] == 6


def test_cron_in_a_timezone_and_jitter_never_fires_early(raw: Raw) -> None:
    raw.ok("POST", "/schedules", {**_body("paris"), "spec": {"cron_expressions": ["30 9 * * 1-5"],
                                                              "timezone": "Europe/Paris"}})
    from zoneinfo import ZoneInfo
    expected = next(CronSim("30 9 * * 1-5", datetime.now(ZoneInfo("Europe/Paris"))))
    assert _ts(raw.ok("GET", "/schedules/paris")["next_fire_at"]) == expected.timestamp()

    raw.ok("POST", "/schedules", {**_body("jittery", "PT1S"), "jitter_seconds": 1, "overlap_policy": "allow_all"})
    deadline = time.monotonic() + 10
    while len([e for e in _audit(raw, "jittery", limit=100) if e["event_type"] == "ScheduleTriggered"]) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    fired = [e for e in _audit(raw, "jittery", limit=100) if e["event_type"] == "ScheduleTriggered"]
    for event in fired:
        occurrence = _ts(event["payload"]["occurrence_time"])
        assert occurrence % 1 == 0 and _ts(event["recorded_at"]) >= occurrence
    raw.ok("POST", "/schedules/jittery/pause", {})


def test_schedules_are_per_namespace(server: DevServer) -> None:
    admin = Raw(server.url)
    admin.ok("POST", "/namespaces", {"name": "team-a"})
    team = Raw(server.url, "team-a")
    team.ok("POST", "/schedules", _body("shared-id"))
    assert admin.call("GET", "/schedules/shared-id").json()["reason"] == "schedule_not_found"
    admin.ok("POST", "/schedules", _body("shared-id"))  # the same id in another namespace is fine
    started = team.ok("POST", "/schedules/shared-id/trigger", {})
    assert team.ok("GET", f"/workflows/{started['workflow_id']}")["namespace"] == "team-a"
    assert admin.ok("DELETE", "/namespaces/team-a")["deleted"]["workflow_schedules"] == 1
    assert admin.ok("GET", "/schedules/shared-id")["namespace"] == "default"


def test_a_schedule_keeps_firing_after_a_restart() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "dw.sqlite3")
        with DevServer(db=db) as first:
            Raw(first.url).ok("POST", "/schedules", {**_body("durable", "PT1S"), "max_runs": 1})
        time.sleep(1.2)  # the occurrence comes due while the server is down
        with DevServer(db=db, tick_seconds=0.02) as second:
            raw = Raw(second.url)
            deadline = time.monotonic() + 5
            while "ScheduleDeleted" not in _kinds(_audit(raw, "durable", limit=50)):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            events = _audit(raw, "durable", limit=50)
            assert _kinds(events) == ["ScheduleCreated", "ScheduleTriggered", "ScheduleDeleted"]
            assert raw.ok("GET", f"/workflows/{events[1]['workflow_instance_id']}")["status"] == "pending"
