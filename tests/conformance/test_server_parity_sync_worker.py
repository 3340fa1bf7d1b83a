"""ServerParity fixtures end to end with the ``parity.v1.*`` workflows and activities authored in
``sync_worker`` (``from sync_worker import workflow, activity``) and run by OUR ``Worker`` and ``Client``
against the embedded dev server.

The published-SDK twin is ``test_server_parity_sdk.py``; both pin the same fixture data: the exact
history inventory read from the history route (``expected_events``, ``child_expected_events``), the
exact output (int64 values stay exact), the query answers and the admission refusals.
"""

from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
import requests

from sync_worker import workflow
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.worker import Worker
from sync_worker.workflow.definition import workflow_name
from sync_worker.workflow.history import TERMINAL_RUN_EVENTS
from tests._fixtures import fixture_paths, fixtures_dir, load_fixture
from tests._import_swap import load_with_sync_worker_imports
from tests._sticky_equivalence import every_cut
from tests.e2e._worker_support import RunningWorker

PARITY_DIR = "server-index/tests/Fixtures/ServerParity"
CONTROL = {"X-Durable-Workflow-Control-Plane-Version": "2"}
TERMINAL = ("completed", "failed", "cancelled", "terminated", "timed_out")


# The parity workflows and activities: the SDK-authored source, with only its import line swapped.
# The SDK-authored parity workflows, loaded by path with the import swapped (the SDK need not be installed).
PARITY = load_with_sync_worker_imports(
    ("tests.conformance._parity_workflows", Path(__file__).with_name("_parity_workflows.py")))
SIGNAL_NAME: str = PARITY.SIGNAL_NAME
STREAM_NAME: str = PARITY.STREAM_NAME
WORKFLOWS: List[Any] = PARITY.WORKFLOWS
ACTIVITIES: List[Callable[..., Any]] = PARITY.ACTIVITIES


@workflow.defn(name="parity.v1.queries")
class QueriesBySignal:
    """``parity.v1.queries`` with the deliveries as plain signals instead of a message stream:
    used only by ``test_state_queries_answers_with_signal_delivery``, on its own worker."""

    def __init__(self) -> None:
        self.count = 0
        self.last: Any = None
        self.inbox: List[Any] = []

    @workflow.signal(SIGNAL_NAME)
    def on_signal(self, value: Any) -> None:
        self.inbox.append(value)

    @workflow.query("state")
    def state(self, *arguments: Any) -> Any:
        return {"arguments": list(arguments), "count": self.count, "last": self.last}

    def run(self, ctx: Any, value: Any) -> Any:
        for delivery in range(2):
            # distinct keys: the dev server takes an open with the same key and predicate fingerprint as
            # a re-open of the previous wait (and then records no ConditionWaitSatisfied for it)
            yield ctx.wait_condition(lambda: len(self.inbox) > self.count, key=f"delivery-{delivery}")
            self.last = self.inbox[self.count]
            self.count += 1
        return {"count": self.count, "last": self.last}


# -- helpers -------------------------------------------------------------------------------------
def _types(events: List[Dict[str, Any]]) -> List[str]:
    return [str(e["event_type"]) for e in events]


def _history(client: Client, workflow_id: str, run_id: Optional[str] = None) -> List[Dict[str, Any]]:
    run_id = run_id or client.describe_workflow(workflow_id).run_id
    assert run_id, f"{workflow_id} has no run"
    return list(client.iter_history(workflow_id, run_id))


def _until_history(client: Client, workflow_id: str, predicate: Callable[[List[Dict[str, Any]]], bool],
                   timeout: float = 20.0) -> List[Dict[str, Any]]:
    """Poll the history until ``predicate``; fail at once (with the history) if the run closed first."""
    deadline = time.monotonic() + timeout
    while True:
        description = client.describe_workflow(workflow_id)
        events = _history(client, workflow_id, description.run_id)
        if predicate(events):
            return events
        if description.status in TERMINAL or time.monotonic() > deadline:
            tail = [e.get("payload", {}).get("message") for e in events if e["event_type"] == "WorkflowFailed"]
            raise AssertionError(f"history of {workflow_id} never matched (status={description.status!r}): "
                                 f"{_types(events)} {tail}")
        time.sleep(0.05)


class Harness:
    """Our Client plus our Worker (all parity workflows and activities) on one task queue."""

    def __init__(self, server: DevServer, fixture: Dict[str, Any], token: Optional[str] = None,
                 workflows: Optional[List[type]] = None, sticky: int = 0) -> None:
        self.fixture = fixture
        self.queue = f"parity-sw-{fixture['id']}-{uuid.uuid4().hex[:6]}"
        self.client = Client(server.url, token=token)
        self.worker = Worker(self.client, task_queue=self.queue, workflows=workflows or WORKFLOWS,
                             activities=ACTIVITIES, poll_timeout=2.0, shutdown_timeout=10.0,
                             sticky_cache_capacity=sticky)
        self.started: List[Any] = []  # (workflow id, start arguments)

    def start(self, *args: Any, suffix: str = "") -> str:
        workflow_id = f"parity-sw-{self.fixture['id']}{suffix}-{uuid.uuid4().hex[:6]}"
        self.client.start_workflow(self.fixture["workflow_type"], *args, task_queue=self.queue,
                                   workflow_id=workflow_id)
        self.started.append((workflow_id, list(args)))
        return workflow_id


@contextmanager
def running_harness(server: DevServer, fixture: Dict[str, Any], token: Optional[str] = None,
                    workflows: Optional[List[type]] = None, sticky: int = 0) -> Iterator[Harness]:
    """A Harness whose worker runs for the block; stopped (warm, must be clean) before the server goes."""
    harness = Harness(server, fixture, token, workflows, sticky)
    try:
        with RunningWorker(harness.worker) as running:
            yield harness
            assert running.stop() is None, "worker did not stop cleanly"
    finally:
        harness.client.close()


# -- scenarios -----------------------------------------------------------------------------------
def _simple(h: Harness, server: DevServer) -> None:
    """echo, one-activity, one-timer: start with the typed input, expect it back."""
    fixture = h.fixture
    workflow_id = h.start(fixture["input"])
    result = h.client.get_result(workflow_id, timeout=30, poll_interval=0.1)
    assert result == fixture.get("output", fixture["input"])
    events = _history(h.client, workflow_id)
    assert _types(events) == fixture["expected_events"]
    if fixture["id"] == "one-activity":
        scheduled = next(e for e in events if e["event_type"] == "ActivityScheduled")["payload"]
        assert scheduled["activity_type"] == "parity.v1.echo_activity"
    if fixture["id"] == "one-timer":
        scheduled = next(e for e in events if e["event_type"] == "TimerScheduled")["payload"]
        fired = next(e for e in events if e["event_type"] == "TimerFired")["payload"]
        assert scheduled["delay_seconds"] == fixture["timer_delays"][0]
        assert (fired["timer_id"], fired["sequence"]) == (scheduled["timer_id"], scheduled["sequence"])
        assert fired["fired_at"] >= fired["fire_at"] == scheduled["fire_at"]


def _one_signal(h: Harness, server: DevServer) -> None:
    fixture = h.fixture
    workflow_id = h.start(fixture["input"])
    _until_history(h.client, workflow_id, lambda ev: "ConditionWaitOpened" in _types(ev))
    h.client.signal_workflow(workflow_id, SIGNAL_NAME, args=[fixture["signal_value"]])
    assert h.client.get_result(workflow_id, timeout=30, poll_interval=0.1) == fixture["signal_value"]
    events = _history(h.client, workflow_id)
    assert _types(events) == fixture["expected_events"]
    opened = next(e for e in events if e["event_type"] == "ConditionWaitOpened")["payload"]
    satisfied = next(e for e in events if e["event_type"] == "ConditionWaitSatisfied")["payload"]
    received = next(e for e in events if e["event_type"] == "SignalReceived")["payload"]
    assert satisfied["condition_wait_id"] == opened["condition_wait_id"]
    assert satisfied["workflow_signal_id"] == received["signal_id"]


def _append_message(server: DevServer, workflow_id: str, message_id: str, value: Any) -> None:
    Client(server.url).append_message_stream(workflow_id, STREAM_NAME, value, message_id=message_id)


def _state_queries(h: Harness, server: DevServer, by_signal: bool = False) -> None:
    fixture = h.fixture
    workflow_id = h.start(fixture["input"])
    total = fixture["signal_count"]
    for delivered in range(total + 1):
        if delivered and by_signal:
            h.client.signal_workflow(workflow_id, SIGNAL_NAME, args=[fixture["signal_value"]])
        elif delivered:
            _append_message(server, workflow_id, f"message-{delivered}", fixture["signal_value"])

        def reached(ev: List[Dict[str, Any]], n: int = delivered) -> bool:
            kinds = _types(ev)
            if kinds.count("SignalApplied") != n:
                return False
            return kinds.count("ConditionWaitOpened") == n + 1 if n < total else "WorkflowCompleted" in kinds

        before = _types(_until_history(h.client, workflow_id, reached))
        step = next(q for q in fixture["queries"] if q["after_signal_count"] == delivered)
        answer = h.client.query_workflow(workflow_id, fixture["query_name"], args=fixture["query_arguments"])["result"]
        assert answer == {"arguments": fixture["query_arguments"], "count": delivered,
                          "last": fixture["signal_value"] if delivered else None}
        assert h.client.describe_workflow(workflow_id).status == step["status"]
        assert _types(_history(h.client, workflow_id)) == before, "a query changed the history"
    assert h.client.get_result(workflow_id, timeout=30) == {"count": 2, "last": fixture["signal_value"]}
    expected = fixture["expected_events"]  # signals and stream messages both advance a cursor
    actual = _types(_history(h.client, workflow_id))
    assert actual == expected, f"history inventory differs:\n got      {actual}\n expected {expected}"


def _activity_retry(h: Harness, server: DevServer) -> None:
    fixture = h.fixture
    workflow_id = h.start(fixture["input"], fixture["retry_policy"], fixture["failure"]["message"])
    result = h.client.get_result(workflow_id, timeout=30, poll_interval=0.1)
    assert result == fixture["output"]
    assert result["echo"]["large"] == 9007199254740993 and isinstance(result["echo"]["large"], int)
    events = _history(h.client, workflow_id)
    assert _types(events) == fixture["expected_events"]
    by_type = {e["event_type"]: e["payload"] for e in events}
    retry = by_type["ActivityRetryScheduled"]
    starts = [e for e in events if e["event_type"] == "ActivityStarted"]
    assert retry["exception_type"] == fixture["failure"]["type"]
    assert retry["message"] == fixture["failure"]["message"]
    assert len({s["payload"]["activity_attempt_id"] for s in starts}) == 2
    assert {s["payload"]["sequence"] for s in starts} == {by_type["ActivityScheduled"]["sequence"]}
    assert starts[1]["recorded_at"] >= retry["retry_available_at"]


def _two_children(h: Harness, server: DevServer) -> None:
    fixture = h.fixture
    workflow_id = h.start(fixture["input"])
    assert h.client.get_result(workflow_id, timeout=30, poll_interval=0.1) == fixture["output"]
    events = _history(h.client, workflow_id)
    assert _types(events) == fixture["expected_events"]
    children = [e["payload"] for e in events if e["event_type"] == "ChildRunCompleted"]
    assert len(children) == fixture["child_count"]
    for child in children:
        child_events = _history(h.client, child["child_workflow_instance_id"], child["child_workflow_run_id"])
        assert _types(child_events) == fixture["child_expected_events"]
        assert child_events[0]["payload"].get("workflow_type", fixture["child_workflow_type"]) == \
            fixture["child_workflow_type"]


def _cancel_pending_timer(h: Harness, server: DevServer) -> None:
    fixture = h.fixture
    cancellation = fixture["immediate_cancellation"]
    workflow_id = h.start(fixture["input"])
    _until_history(h.client, workflow_id, lambda ev: "TimerScheduled" in _types(ev))
    h.client.cancel_workflow(workflow_id, reason=cancellation["reason"])
    events = _until_history(h.client, workflow_id, lambda ev: "WorkflowCancelled" in _types(ev))
    assert _types(events) == fixture["expected_events"]
    scheduled = next(e for e in events if e["event_type"] == "TimerScheduled")["payload"]
    cancelled = next(e for e in events if e["event_type"] == "TimerCancelled")["payload"]
    assert scheduled["delay_seconds"] == cancellation["delay_seconds"]
    assert cancelled["timer_id"] == scheduled["timer_id"]
    assert events[-1]["payload"]["reason"] == cancellation["reason"]
    assert h.client.describe_workflow(workflow_id).status == "cancelled"
    again = requests.post(f"{server.url}/api/workflows/{workflow_id}/cancel", headers=CONTROL,
                          json={"reason": "again"}, timeout=10)
    assert (again.status_code, again.json()["reason"]) == (409, "run_not_active")
    assert _history(h.client, workflow_id) == events


def _admission(fixture: Dict[str, Any]) -> None:
    token = "parity-token"
    spec = fixture["admission"]
    with DevServer(port=0, db=":memory:", token=token) as server, running_harness(server, fixture, token) as h:
        workflow_id = h.start(fixture["input"])
        assert h.client.get_result(workflow_id, timeout=30, poll_interval=0.1) == fixture["input"]
        assert _types(_history(h.client, workflow_id)) == fixture["expected_events"]
        peer_id = f"parity-sw-admission{spec['peer_suffix']}-{uuid.uuid4().hex[:6]}"
        h.client.start_workflow(spec["peer_workflow_type"], fixture["input"], task_queue="parity-unclaimed",
                                workflow_id=peer_id)
        peer_before = _history(h.client, peer_id)
        assert _types(peer_before) == ["StartAccepted", "WorkflowStarted"]

        for case in spec["requests"]:
            headers: Dict[str, str] = {}
            if case["auth"] == "valid":
                headers["Authorization"] = f"Bearer {token}"
            elif case["auth"] == "invalid":
                headers["Authorization"] = "Bearer not-the-token"
            version_header = ("X-Durable-Workflow-Protocol-Version" if case["plane"] == "worker"
                              else "X-Durable-Workflow-Control-Plane-Version")
            if case["version"] is not None:
                headers[version_header] = case["version"]
            if case["header_namespace"] is not None:
                headers["X-Namespace"] = case["header_namespace"]
            params = {"namespace": case["query_namespace"]} if case["query_namespace"] is not None else None
            if case["plane"] == "control":
                resp = requests.post(f"{server.url}/api/workflows/{peer_id}/cancel", headers=headers,
                                     params=params, json={"reason": spec["refused_reason"]}, timeout=10)
            elif case["plane"] == "worker":
                resp = requests.post(f"{server.url}/api/worker/workflow-tasks/poll", headers=headers, params=params,
                                     json={"worker_id": "parity-sw-admission-probe", "task_queue": "parity-unclaimed",
                                           "timeout_seconds": 0}, timeout=10)
            else:
                resp = requests.get(f"{server.url}/api/workflows/{peer_id}", headers=headers, params=params,
                                    timeout=10)
            assert resp.status_code == case["status"], case["id"]
            if case["reason"] is not None:
                body = resp.json()
                assert body["reason"] == case["reason"], case["id"]
                assert isinstance(body["error"], str) and body["error"], case["id"]
            else:
                assert resp.json()["workflow_id"] == peer_id, case["id"]

        assert _history(h.client, peer_id) == peer_before, "a refused request changed the peer's history"
        h.client.cancel_workflow(peer_id, reason=spec["cleanup_reason"])
        final = _history(h.client, peer_id)
        assert _types(final) == ["StartAccepted", "WorkflowStarted", "CancelRequested", "WorkflowCancelled"]
        assert final[-1]["payload"]["reason"] == spec["cleanup_reason"]


SCENARIOS: Dict[str, Callable[[Harness, DevServer], None]] = {
    "echo": _simple,
    "one-activity": _simple,
    "one-timer": _simple,
    "one-signal": _one_signal,
    "state-queries": _state_queries,
    "activity-retry": _activity_retry,
    "two-child-workflows": _two_children,
    "cancel-pending-timer": _cancel_pending_timer,
}


def test_every_parity_fixture_has_a_scenario() -> None:
    fixtures_dir()
    ids = {load_fixture(f"{PARITY_DIR}/{p.name}")["id"] for p in fixture_paths(PARITY_DIR)}
    assert ids == set(SCENARIOS) | {"admission-auth-namespace"}


@pytest.mark.parametrize("path", fixture_paths(PARITY_DIR), ids=lambda p: p.stem)
def test_server_parity_fixture_on_sync_worker(path: Path, dev_server: DevServer) -> None:
    fixtures_dir()
    fixture = load_fixture(f"{PARITY_DIR}/{path.name}")
    assert fixture["schema"] == "durable-workflow.server-parity-fixture/v1"
    if fixture["id"] == "admission-auth-namespace":
        _admission(fixture)
        return
    scenario = SCENARIOS.get(fixture["id"])
    if scenario is None:
        pytest.fail(f"no parity.v1 workflow authored in sync_worker for fixture {fixture['id']!r}")
    with running_harness(dev_server, fixture) as harness:
        scenario(harness, dev_server)


def test_state_queries_answers_with_signal_delivery(dev_server: DevServer) -> None:
    """The state-queries plan (exact typed query arguments, counts, statuses, history untouched by
    queries) on our worker, with the two deliveries sent as signals instead of stream messages."""
    fixtures_dir()
    fixture = load_fixture(f"{PARITY_DIR}/state-queries.json")
    workflows: List[type] = [QueriesBySignal]
    with running_harness(dev_server, fixture, workflows=workflows) as harness:
        _state_queries(harness, dev_server, by_signal=True)


@pytest.mark.parametrize("path", [p for p in fixture_paths(PARITY_DIR) if p.stem != "admission-auth-namespace"],
                         ids=lambda p: p.stem)
def test_server_parity_fixture_on_a_sticky_worker(path: Path, dev_server: DevServer) -> None:
    """The same plans with the sticky cache on: the same results and exact event inventories,
    and each run's history (condition waits released by signals in one-signal and state-queries)
    resumes equal to a cold replay at every cut."""
    fixtures_dir()
    fixture = load_fixture(f"{PARITY_DIR}/{path.name}")
    cls = next(workflow_cls for workflow_cls in WORKFLOWS if workflow_name(workflow_cls) == fixture["workflow_type"])
    with running_harness(dev_server, fixture, sticky=16) as harness:
        SCENARIOS[fixture["id"]](harness, dev_server)
        metrics = harness.worker.sticky_cache_metrics()
        histories = [(args, [event for event in _history(harness.client, workflow_id)
                             if event["event_type"] not in TERMINAL_RUN_EVENTS])
                     for workflow_id, args in harness.started]
    assert metrics["forced_cold_replay"] == 0 and histories, metrics
    for args, events in histories:
        every_cut(cls, args, events)
