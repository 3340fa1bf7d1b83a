"""ServerParity fixtures against the dev server, with the ``parity.v1.*`` workflows authored with the
published SDK (``durable_workflow`` 2.12.0) and run by its own Worker.

Each fixture pins the exact HTTP history inventory (``expected_events``), the output and, for
``admission-auth-namespace``, the refusal status and reason of every request.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest
import requests
from durable_workflow import Client, Worker

from sync_worker.devserver import DevServer
from tests._fixtures import fixture_paths, fixtures_dir, load_fixture
from tests.conformance._parity_workflows import ACTIVITIES, SIGNAL_NAME, STREAM_NAME, WORKFLOWS
from tests.interop._sdk import run, with_worker

PARITY_DIR = "server-index/tests/Fixtures/ServerParity"
CONTROL = {"X-Durable-Workflow-Control-Plane-Version": "2"}


# -- helpers -------------------------------------------------------------------------------------
def _history(url: str, workflow_id: str, run_id: Optional[str] = None, headers: Optional[Dict[str, str]] = None
             ) -> List[Dict[str, Any]]:
    h = {**CONTROL, **(headers or {})}
    if run_id is None:
        run_id = requests.get(f"{url}/api/workflows/{workflow_id}", headers=h, timeout=10).json()["run_id"]
    resp = requests.get(f"{url}/api/workflows/{workflow_id}/runs/{run_id}/history", headers=h, timeout=10)
    resp.raise_for_status()
    return list(resp.json()["events"])


def _types(events: List[Dict[str, Any]]) -> List[str]:
    return [e["event_type"] for e in events]


async def _until_history(client: Client, workflow_id: str, predicate: Callable[[List[Dict[str, Any]]], bool],
                         timeout: float = 20.0) -> List[Dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        desc = await client.describe_workflow(workflow_id)
        events = (await client.get_history(workflow_id, desc.run_id))["events"]
        if predicate(events):
            return list(events)
        if time.monotonic() > deadline:
            raise AssertionError(f"history of {workflow_id} never matched: {_types(events)}")
        await asyncio.sleep(0.05)


def _run_fixture(server: DevServer, fixture: Dict[str, Any], scenario: Callable[[Client], Any],
                 token: Optional[str] = None) -> Any:
    async def body(client: Client, worker: Worker) -> Any:
        return await scenario(client)

    return run(with_worker(server.url, f"parity-{fixture['id']}", body, workflows=WORKFLOWS,
                           activities=ACTIVITIES, token=token))


async def _start(client: Client, fixture: Dict[str, Any], args: List[Any], suffix: str = "") -> Any:
    return await client.start_workflow(workflow_type=fixture["workflow_type"], task_queue=f"parity-{fixture['id']}",
                                       workflow_id=f"parity-{fixture['id']}{suffix}", input=args)


# -- scenarios -----------------------------------------------------------------------------------
def _simple(server: DevServer, fixture: Dict[str, Any]) -> None:
    """echo, one-activity, one-timer: start with the typed input, expect it back."""
    async def scenario(client: Client) -> Any:
        handle = await _start(client, fixture, [fixture["input"]])
        return handle, await client.get_result(handle, timeout=30)

    handle, result = _run_fixture(server, fixture, scenario)
    assert result == fixture.get("output", fixture["input"])
    events = _history(server.url, handle.workflow_id, handle.run_id)
    assert _types(events) == fixture["expected_events"]
    if fixture["id"] == "one-timer":
        scheduled = next(e for e in events if e["event_type"] == "TimerScheduled")["payload"]
        fired = next(e for e in events if e["event_type"] == "TimerFired")["payload"]
        assert (fired["timer_id"], fired["sequence"]) == (scheduled["timer_id"], scheduled["sequence"])
        assert fired["fired_at"] >= fired["fire_at"] == scheduled["fire_at"]


def _one_signal(server: DevServer, fixture: Dict[str, Any]) -> None:
    async def scenario(client: Client) -> Any:
        handle = await _start(client, fixture, [fixture["input"]])
        await _until_history(client, handle.workflow_id,
                             lambda ev: "ConditionWaitOpened" in _types(ev))
        await client.signal_workflow(handle.workflow_id, SIGNAL_NAME, args=[fixture["signal_value"]])
        return handle, await client.get_result(handle, timeout=30)

    handle, result = _run_fixture(server, fixture, scenario)
    assert result == fixture["signal_value"]
    events = _history(server.url, handle.workflow_id, handle.run_id)
    assert _types(events) == fixture["expected_events"]
    opened = next(e for e in events if e["event_type"] == "ConditionWaitOpened")["payload"]
    satisfied = next(e for e in events if e["event_type"] == "ConditionWaitSatisfied")["payload"]
    received = next(e for e in events if e["event_type"] == "SignalReceived")["payload"]
    assert satisfied["condition_wait_id"] == opened["condition_wait_id"]
    assert satisfied["workflow_signal_id"] == received["signal_id"]


def _state_queries(server: DevServer, fixture: Dict[str, Any]) -> None:
    checks: List[Any] = []

    async def query(client: Client, workflow_id: str, expected_count: int, last: Any, status: str) -> None:
        before = _types(await _until_history(client, workflow_id, lambda ev: True))
        answer = await client.query_workflow(workflow_id, fixture["query_name"], args=fixture["query_arguments"])
        after = _types(await _until_history(client, workflow_id, lambda ev: True))
        desc = await client.describe_workflow(workflow_id)
        checks.append((answer["result"], desc.status, before == after,
                       {"arguments": fixture["query_arguments"], "count": expected_count, "last": last}, status))

    async def scenario(client: Client) -> Any:
        handle = await _start(client, fixture, [fixture["input"]])
        plan = fixture["queries"]
        for delivered in range(fixture["signal_count"] + 1):
            if delivered:
                await client.append_message_stream(handle.workflow_id, STREAM_NAME, f"message-{delivered}",
                                                   args=[fixture["signal_value"]])
            expected_wait = 2 if delivered < fixture["signal_count"] else 0
            await _until_history(client, handle.workflow_id, lambda ev, n=delivered, w=expected_wait: (
                _types(ev).count("SignalApplied") == n
                and (_types(ev).count("ConditionWaitOpened") == n + 1 if w else "WorkflowCompleted" in _types(ev))))
            step = next(q for q in plan if q["after_signal_count"] == delivered)
            await query(client, handle.workflow_id, delivered, fixture["signal_value"] if delivered else None,
                        step["status"])
        return handle, await client.get_result(handle, timeout=30)

    handle, result = _run_fixture(server, fixture, scenario)
    assert result == {"count": 2, "last": fixture["signal_value"]}
    for answer, status, unchanged, expected, expected_status in checks:
        assert answer == expected
        assert status == expected_status
        assert unchanged, "a query changed the history"
    assert _types(_history(server.url, handle.workflow_id, handle.run_id)) == fixture["expected_events"]


def _activity_retry(server: DevServer, fixture: Dict[str, Any]) -> None:
    async def scenario(client: Client) -> Any:
        handle = await _start(client, fixture, [fixture["input"], fixture["retry_policy"],
                                                fixture["failure"]["message"]])
        return handle, await client.get_result(handle, timeout=30)

    handle, result = _run_fixture(server, fixture, scenario)
    assert result == fixture["output"]
    events = _history(server.url, handle.workflow_id, handle.run_id)
    assert _types(events) == fixture["expected_events"]
    by_type = {e["event_type"]: e["payload"] for e in events}
    retry = by_type["ActivityRetryScheduled"]
    starts = [e for e in events if e["event_type"] == "ActivityStarted"]
    assert retry["exception_type"] == fixture["failure"]["type"]
    assert retry["message"] == fixture["failure"]["message"]
    assert len({s["payload"]["activity_attempt_id"] for s in starts}) == 2
    assert {s["payload"]["sequence"] for s in starts} == {by_type["ActivityScheduled"]["sequence"]}
    assert starts[1]["recorded_at"] >= retry["retry_available_at"]  # never claimable before the backoff


def _two_children(server: DevServer, fixture: Dict[str, Any]) -> None:
    async def scenario(client: Client) -> Any:
        handle = await _start(client, fixture, [fixture["input"]])
        return handle, await client.get_result(handle, timeout=30)

    handle, result = _run_fixture(server, fixture, scenario)
    assert result == fixture["output"]
    events = _history(server.url, handle.workflow_id, handle.run_id)
    assert _types(events) == fixture["expected_events"]
    children = [e["payload"] for e in events if e["event_type"] == "ChildRunCompleted"]
    assert len(children) == fixture["child_count"]
    for child in children:
        child_events = _history(server.url, child["child_workflow_instance_id"], child["child_workflow_run_id"])
        assert _types(child_events) == fixture["child_expected_events"]


def _cancel_pending_timer(server: DevServer, fixture: Dict[str, Any]) -> None:
    cancellation = fixture["immediate_cancellation"]

    async def scenario(client: Client) -> Any:
        handle = await _start(client, fixture, [fixture["input"]])
        await _until_history(client, handle.workflow_id, lambda ev: "TimerScheduled" in _types(ev))
        await client.cancel_workflow(handle.workflow_id, reason=cancellation["reason"])
        return handle

    handle = _run_fixture(server, fixture, scenario)
    events = _history(server.url, handle.workflow_id, handle.run_id)
    assert _types(events) == fixture["expected_events"]
    scheduled = next(e for e in events if e["event_type"] == "TimerScheduled")["payload"]
    cancelled = next(e for e in events if e["event_type"] == "TimerCancelled")["payload"]
    assert scheduled["delay_seconds"] == cancellation["delay_seconds"]
    assert cancelled["timer_id"] == scheduled["timer_id"]
    assert events[-1]["payload"]["reason"] == cancellation["reason"]
    again = requests.post(f"{server.url}/api/workflows/{handle.workflow_id}/cancel", headers=CONTROL,
                          json={"reason": "again"}, timeout=10)
    assert (again.status_code, again.json()["reason"]) == (409, "run_not_active")
    assert _history(server.url, handle.workflow_id, handle.run_id) == events


def _admission(fixture: Dict[str, Any]) -> None:
    token = "parity-token"
    spec = fixture["admission"]
    with DevServer(token=token) as server:
        auth = {"Authorization": f"Bearer {token}"}

        async def scenario(client: Client) -> Any:
            handle = await _start(client, fixture, [fixture["input"]])
            result = await client.get_result(handle, timeout=30)
            peer = await client.start_workflow(workflow_type=spec["peer_workflow_type"], task_queue="parity-unclaimed",
                                               workflow_id=f"parity-admission{spec['peer_suffix']}",
                                               input=[fixture["input"]])
            return handle, result, peer

        handle, result, peer = _run_fixture(server, fixture, scenario, token=token)
        assert result == fixture["input"]
        assert _types(_history(server.url, handle.workflow_id, handle.run_id, auth)) == fixture["expected_events"]
        peer_before = _history(server.url, peer.workflow_id, peer.run_id, auth)
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
                resp = requests.post(f"{server.url}/api/workflows/{peer.workflow_id}/cancel", headers=headers,
                                     params=params, json={"reason": spec["refused_reason"]}, timeout=10)
            elif case["plane"] == "worker":
                resp = requests.post(f"{server.url}/api/worker/workflow-tasks/poll", headers=headers, params=params,
                                     json={"worker_id": "parity-admission-probe", "task_queue": "parity-unclaimed",
                                           "timeout_seconds": 0}, timeout=10)
            else:
                resp = requests.get(f"{server.url}/api/workflows/{peer.workflow_id}", headers=headers,
                                    params=params, timeout=10)
            assert resp.status_code == case["status"], case["id"]
            if case["reason"] is not None:
                body = resp.json()
                assert body["reason"] == case["reason"], case["id"]
                assert isinstance(body["error"], str) and body["error"], case["id"]
            else:
                assert resp.json()["workflow_id"] == peer.workflow_id, case["id"]

        assert _history(server.url, peer.workflow_id, peer.run_id, auth) == peer_before
        cleanup = requests.post(f"{server.url}/api/workflows/{peer.workflow_id}/cancel", headers={**CONTROL, **auth},
                                json={"reason": spec["cleanup_reason"]}, timeout=10)
        assert cleanup.status_code == 200
        final = _history(server.url, peer.workflow_id, peer.run_id, auth)
        assert _types(final) == ["StartAccepted", "WorkflowStarted", "CancelRequested", "WorkflowCancelled"]
        assert final[-1]["payload"]["reason"] == spec["cleanup_reason"]


SCENARIOS: Dict[str, Callable[[DevServer, Dict[str, Any]], None]] = {
    "echo": _simple,
    "one-activity": _simple,
    "one-timer": _simple,
    "one-signal": _one_signal,
    "state-queries": _state_queries,
    "activity-retry": _activity_retry,
    "two-child-workflows": _two_children,
    "cancel-pending-timer": _cancel_pending_timer,
}


@pytest.mark.parametrize("path", fixture_paths(PARITY_DIR), ids=lambda p: p.stem)
def test_server_parity_fixture(path: Path, dev_server: DevServer) -> None:
    fixtures_dir()
    fixture = load_fixture(f"{PARITY_DIR}/{path.name}")
    assert fixture["schema"] == "durable-workflow.server-parity-fixture/v1"
    if fixture["id"] == "admission-auth-namespace":
        _admission(fixture)
        return
    scenario = SCENARIOS.get(fixture["id"])
    if scenario is None:
        pytest.fail(f"no parity.v1 workflow authored for fixture {fixture['id']!r}")
    scenario(dev_server, fixture)


def _typed(value: Dict[str, Any]) -> Any:
    """The Codec fixture's typed notation to the Python value the SDK encodes."""
    import base64

    kind = value["type"]
    if kind == "null":
        return None
    if kind == "boolean":
        return bool(value["value"])
    if kind == "long":
        return int(value["value"])
    if kind == "double":
        return float(value["value"])
    if kind == "string":
        return value["value"]
    if kind == "bytes":
        return base64.b64decode(value["base64"])
    if kind == "array":
        return [_typed(item) for item in value["items"]]
    if kind == "map":
        return {entry["key"]: _typed(entry["value"]) for entry in value["entries"]}
    raise AssertionError(f"unknown typed value {kind!r}")


def test_codec_edge_cases_round_trip_through_the_server(dev_server: DevServer) -> None:
    """Every ``ServerParity/Codec/v1.json`` value survives start input -> history -> workflow output."""
    import math

    fixtures_dir()
    cases = load_fixture(f"{PARITY_DIR}/Codec/v1.json")["cases"]
    fixture = {"id": "codec", "workflow_type": "parity.v1.echo"}

    async def scenario(client: Client) -> Any:
        handles = [await _start(client, fixture, [_typed(case["value"])], suffix=f"-{case['id']}")
                   for case in cases]
        return [await client.get_result(handle, timeout=30) for handle in handles]

    results = _run_fixture(dev_server, fixture, scenario)
    assert len(results) == len(cases) >= 10
    for case, result in zip(cases, results):
        expected = _typed(case["value"])
        assert result == expected and type(result) is type(expected), case["id"]
        if isinstance(expected, float):
            assert math.copysign(1.0, result) == math.copysign(1.0, expected), case["id"]
