"""The door fuzzer (see ``test_fuzz``) over the operator routes: namespaces, schedules, task-queue
rollouts, search attributes and the maintenance commands. A field of a valid body is replaced by
a hostile JSON value; no answer may be a 5xx, a refusal must leave the store unchanged, and the
schedule and namespace reads must keep answering afterwards."""

from __future__ import annotations

import http.client
import json
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sync_worker.devserver import DevServer
from sync_worker.devserver.store import TABLES
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import CONTROL, Raw
from tests.unit.devserver.test_fuzz import _fields, _hostile, _render


class Harness:
    def __init__(self, server: DevServer) -> None:
        self.server = server
        self.raw = Raw(server.url)
        self.counter = 0
        self.raw.ok("POST", "/namespaces", {"name": "fz-ns"})
        self.raw.ok("POST", "/schedules", self.schedule_body("fz-s"))
        self.raw.start("fz-wf")
        task = self.raw.poll()
        self.raw.complete(task, [{"type": "complete_workflow", "result": envelope(1)}])

    @staticmethod
    def schedule_body(schedule_id: str) -> Dict[str, Any]:
        return {"schedule_id": schedule_id, "spec": {"intervals": [{"every": "PT30M", "offset": "PT1M"}],
                                                     "cron_expressions": ["0 6 * * *"], "timezone": "UTC"},
                "action": {"workflow_type": "t", "task_queue": "fz-q", "input": envelope([1]),
                           "execution_timeout_seconds": 60, "run_timeout_seconds": 60},
                "overlap_policy": "skip", "jitter_seconds": 0, "max_runs": 1000, "memo": {"a": 1},
                "search_attributes": {"b": "c"}, "paused": False, "note": "n"}

    def requests(self) -> List[Tuple[str, str, Dict[str, Any]]]:
        self.counter += 1
        n = self.counter
        return [
            ("POST", "/api/namespaces", {"name": f"fz-{n}", "description": "d", "retention_days": 30}),
            ("PUT", "/api/namespaces/fz-ns", {"description": "d", "retention_days": 40}),
            ("POST", "/api/schedules", self.schedule_body(f"fz-new-{n}")),
            ("PUT", "/api/schedules/fz-s", {k: v for k, v in self.schedule_body("fz-s").items()
                                            if k not in ("schedule_id", "paused")}),
            ("POST", "/api/schedules/fz-s/trigger", {"overlap_policy": "allow_all"}),
            ("POST", "/api/schedules/fz-s/backfill", {"start_time": "2026-04-20T00:00:00Z",
                                                      "end_time": "2026-04-20T01:00:00Z", "overlap_policy": "skip"}),
            ("POST", "/api/schedules/fz-s/pause", {"note": "n"}),
            ("POST", "/api/task-queues/fz-q/build-ids/drain", {"build_id": "b1"}),
            ("POST", "/api/search-attributes", {"name": f"Fz{n}", "type": "keyword"}),
            ("POST", "/api/workflows/fz-wf/archive", {"reason": "r"}),
            ("POST", "/api/workflows/fz-wf/repair", {"reason": "r"}),
            ("POST", "/api/system/repair/pass", {"run_ids": ["run-x"], "instance_id": "fz-wf"}),
            ("POST", "/api/system/retention/pass", {"run_ids": ["run-x"], "limit": 50}),
            ("POST", "/api/system/activity-timeouts/pass", {"execution_ids": ["act-x"], "limit": 50}),
        ]

    def send(self, method: str, path: str, data: bytes) -> Tuple[int, Any]:
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=20)
        try:
            conn.request(method, path, body=data, headers={"Content-Type": "application/json", **CONTROL})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read().decode("utf-8") or "null")
        finally:
            conn.close()

    def state(self) -> Any:
        engine = self.server.engine
        with engine.lock:
            tables = {name: sorted(json.dumps(row, sort_keys=True) for row in engine.store.iter_all(name))
                      for name in TABLES if name not in ("workers", "schedules")}
            schedules = sorted(json.dumps({k: v for k, v in row.items() if k not in ("next_fire_at", "due_at")},
                                          sort_keys=True) for row in engine.store.iter_all("schedules"))
            events = {run["run_id"]: engine.store.event_count(run["run_id"]) for run in engine.store.iter_all("runs")}
        return tables, schedules, events

    def reads_work(self) -> None:
        for path in ("/schedules", "/schedules/fz-s", "/schedules/fz-s/history", "/namespaces", "/task-queues",
                     "/task-queues/fz-q/build-ids", "/search-attributes", "/system/repair", "/system/retention",
                     "/system/activity-timeouts"):
            resp = self.raw.call("GET", path)
            assert resp.status_code == 200, (path, resp.text)


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    with DevServer(workflow_task_lease_seconds=600, tick_seconds=3600) as server:  # no clock during fuzzing
        yield Harness(server)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_operator_routes_never_5xx_and_refusals_change_nothing(harness: Harness, data: st.DataObject) -> None:
    method, path, body = data.draw(st.sampled_from(harness.requests()), label="route")
    field = data.draw(st.one_of(st.sampled_from(_fields(body)), st.just("extra_field")), label="field")
    hostile = data.draw(_hostile, label="value")
    before = harness.state()
    status, answer = harness.send(method, path, _render(body, field, hostile))
    assert status < 500, (path, field, hostile[:80], status, answer)
    if status >= 400:
        assert isinstance(answer, dict) and isinstance(answer.get("reason"), str), answer
        assert harness.state() == before, (path, field, hostile[:80], answer)
    harness.reads_work()
    if path == "/api/schedules/fz-s/pause" and status < 400:
        harness.raw.ok("POST", "/schedules/fz-s/resume", {})
    if path == "/api/schedules/fz-s" and status < 400:  # keep the schedule small for the next backfills
        harness.raw.ok("PUT", "/schedules/fz-s", {"spec": {"intervals": [{"every": "PT30M"}]}, "max_runs": 1000,
                                                  "overlap_policy": "skip"})
