"""A fuzzer at the dev server's door (issue 9): hypothesis mutates valid requests of every route
family — a field replaced by a hostile value (NaN, Infinity, 1e308, huge integers, deep nesting,
wrong types), written as raw JSON text so non-standard tokens reach the server — and asserts:

* no answer is a 5xx;
* a refused request (4xx) leaves the whole store unchanged;
* after every request, listing workflows and claiming work still answer (no poison row).
"""

from __future__ import annotations

import http.client
import json
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sync_worker.devserver import DevServer
from sync_worker.devserver.store import TABLES
from sync_worker.payloads import envelope
from tests.unit.devserver._raw import CONTROL, WORKER, Raw

#: Values JSON text can carry that no field should make the server trip over.
_HOSTILE_TEXT = ["NaN", "Infinity", "-Infinity", "1e308", "-1e308", "1e999", "1e12", "1e15", "9" * 30, "-1",
                 "0", "0.5", '"abc"', '""', "null", "true", "[]", "{}", "[" * 200 + "]" * 200,
                 '{"a":' * 80 + "1" + "}" * 80, '"' + "x" * 5000 + '"', '{"codec": "json", "blob": "1"}']

_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70),
                       st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
_json_value = st.recursive(_json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=12)
_hostile = st.one_of(st.sampled_from(_HOSTILE_TEXT), _json_value.map(lambda v: json.dumps(v)))


def _fields(body: Dict[str, Any]) -> List[str]:
    """Dotted paths of every field in a body (so mutations reach nested command fields too)."""
    out: List[str] = []

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                out.append(prefix + key)
                walk(item, prefix + key + ".")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{prefix}{index}.")

    walk(body, "")
    return out


_MARK = "\u0000HOSTILE\u0000"


def _with_field(body: Any, path: List[str], marker: str) -> Any:
    if not path:
        return marker
    head, rest = path[0], path[1:]
    if isinstance(body, list):
        copy_list = list(body)
        copy_list[int(head)] = _with_field(copy_list[int(head)], rest, marker)
        return copy_list
    copy = dict(body)
    copy[head] = _with_field(copy.get(head), rest, marker) if rest else marker
    return copy


def _render(body: Dict[str, Any], field: Optional[str], hostile: str) -> bytes:
    """The body as JSON text with ``field`` (dotted; may be new) replaced by raw ``hostile`` text."""
    if field is None:
        return json.dumps(body).encode()
    marked = _with_field(body, field.split("."), _MARK)
    return json.dumps(marked).replace(json.dumps(_MARK), hostile).encode()


class Harness:
    def __init__(self, server: DevServer) -> None:
        self.server = server
        self.raw = Raw(server.url)
        self.counter = 0
        self.task: Dict[str, Any] = {}
        self.activity: Dict[str, Any] = {}
        self.new_leases()

    def new_leases(self) -> None:
        """A leased activity attempt (from one run) and a leased workflow task (of another)."""
        self.counter += 1
        queue = f"fq-{self.counter}"  # a fresh queue: children of earlier examples never answer these polls
        self.raw.start(f"wf-fuzz-act-{self.counter}", queue=queue)
        scheduling = self.raw.poll(queue=queue, worker_id="fuzz-w")
        assert scheduling is not None
        done = self.raw.complete(scheduling, [{"type": "schedule_activity", "activity_type": "a",
                                               "arguments": envelope([1]), "start_to_close_timeout": 3000}])
        assert done.status_code == 200, done.text
        self.activity = self.raw.poll(queue=queue, worker_id="fuzz-w", kind="activity")
        assert self.activity is not None
        self.raw.start(f"wf-fuzz-{self.counter}", queue=queue)
        self.task = self.raw.poll(queue=queue, worker_id="fuzz-w")
        assert self.task is not None and self.task["workflow_id"] == f"wf-fuzz-{self.counter}"

    def requests(self) -> List[Tuple[str, str, str, Dict[str, Any]]]:
        t, a = self.task, self.activity
        claim = {"activity_attempt_id": a["activity_attempt_id"], "lease_owner": a["lease_owner"]}
        wf = t["workflow_id"]
        return [
            ("POST", "/api/workflows", "control", {
                "workflow_id": f"wf-new-{self.counter}", "workflow_type": "t", "task_queue": "fq-started",
                "input": envelope([]), "execution_timeout_seconds": 3600, "run_timeout_seconds": 600}),
            ("POST", f"/api/worker/workflow-tasks/{t['task_id']}/complete", "worker", {
                "lease_owner": t["lease_owner"], "workflow_task_attempt": t["workflow_task_attempt"],
                "commands": [
                    {"type": "schedule_activity", "activity_type": "a", "arguments": envelope([]),
                     "start_to_close_timeout": 3000, "heartbeat_timeout": 3000,
                     "retry_policy": {"max_attempts": 3, "backoff_seconds": [1, 2]}},
                    {"type": "start_timer", "delay_seconds": 3000},
                    {"type": "start_child_workflow", "workflow_type": "c", "arguments": envelope([]),
                     "execution_timeout_seconds": 3600, "run_timeout_seconds": 600},
                    {"type": "open_condition_wait", "condition_key": "k", "timeout_seconds": 3000},
                ]}),
            ("POST", f"/api/worker/activity-tasks/{a['task_id']}/heartbeat", "worker", {**claim, "details": {}}),
            ("POST", f"/api/worker/activity-tasks/{a['task_id']}/fail", "worker", {
                **claim, "failure": {"message": "boom", "type": "ValueError"}}),
            ("POST", "/api/activities", "control", {
                "activity_type": "a", "task_queue": "fq-started", "input": envelope([]),
                "start_to_close_timeout_seconds": 3000,
                "retry_policy": {"max_attempts": 2}}),
            ("POST", f"/api/workflows/{wf}/signal/go", "control", {"input": envelope([])}),
            ("POST", f"/api/workflows/{wf}/update/u", "control", {"input": envelope([]), "wait_for": "accepted",
                                                                  "wait_timeout_seconds": 0}),
            ("POST", "/api/worker/activity-tasks/poll", "worker", {"worker_id": "fuzz-p", "task_queue": "empty-q",
                                                                   "timeout_seconds": 0}),
        ]

    def send(self, method: str, path: str, plane: str, data: bytes) -> Tuple[int, Any]:
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=20)
        try:
            conn.request(method, path, body=data, headers={
                "Content-Type": "application/json", **(WORKER if plane == "worker" else CONTROL)})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read().decode("utf-8") or "null")
        finally:
            conn.close()

    def state(self) -> Any:
        engine = self.server.engine
        with engine.lock:
            tables = {name: sorted(json.dumps(row, sort_keys=True) for row in engine.store.iter_all(name))
                      for name in TABLES if name != "workers"}
            events = {run["run_id"]: engine.store.event_count(run["run_id"]) for run in engine.store.iter_all("runs")}
        return tables, events

    def reads_and_claims_work(self) -> None:
        assert self.raw.call("GET", "/workflows").status_code == 200
        for kind in ("workflow", "activity"):
            resp = self.raw.call("POST", f"/worker/{kind}-tasks/poll", {
                "worker_id": "fuzz-probe", "task_queue": "probe-q", "timeout_seconds": 0}, plane="worker")
            assert resp.status_code == 200, resp.text


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    # Polls are held at most 1 s (a fuzzed timeout_seconds is clamped to it, not waited out).
    with DevServer(workflow_task_lease_seconds=600, activity_task_lease_seconds=600, long_poll_max_seconds=1) as server:
        yield Harness(server)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_requests_never_5xx_and_refusals_change_nothing(harness: Harness, data: st.DataObject) -> None:
    method, path, plane, body = data.draw(st.sampled_from(harness.requests()), label="route")
    fields = _fields(body)
    field = data.draw(st.one_of(st.sampled_from(fields), st.just("extra_field")), label="field")
    hostile = data.draw(_hostile, label="value")
    before = harness.state()
    status, answer = harness.send(method, path, plane, _render(body, field, hostile))
    assert status < 500, (path, field, hostile[:80], status, answer)
    if status >= 400:
        assert isinstance(answer, dict) and isinstance(answer.get("reason"), str), answer
        assert harness.state() == before, (path, field, hostile[:80], answer)
    harness.reads_and_claims_work()
    if status < 400 and "/worker/" in path and not path.endswith("/poll"):
        harness.new_leases()  # the lease was used up: take fresh ones for the next examples
