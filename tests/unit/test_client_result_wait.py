"""``result()`` waits on the run's history (``wait_new_event``) instead of polling describe: it
answers as soon as the run closes whatever ``poll_interval`` says, follows the server's page tokens,
and falls back to describe polling where the server refuses the wait or does not hold it."""

from __future__ import annotations

import base64
import threading
import time
from typing import Any, Dict, List
from urllib.parse import parse_qs, urlsplit

import pytest
import responses

from sync_worker import errors, payloads
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from tests.unit.devserver._raw import Raw

BASE = "http://dw.test"
API = BASE + "/api"


class Counting:
    """A metrics recorder that counts requests per route."""

    def __init__(self) -> None:
        self.routes: List[str] = []

    def increment(self, name: str, value: int = 1, tags: Any = None) -> None:
        if name == "durable_workflow_client_requests":
            self.routes.append((tags or {}).get("route"))

    def record(self, *args: Any, **kwargs: Any) -> None:
        pass


def test_result_returns_when_the_run_closes_not_at_the_next_poll(dev_server: DevServer) -> None:
    raw = Raw(dev_server.url)
    metrics = Counting()
    client = Client(dev_server.url, metrics=metrics)
    raw.start("wf-wait")

    def finish() -> None:
        time.sleep(0.4)
        task = raw.poll()
        raw.complete(task, [{"type": "start_timer", "delay_seconds": 0}])
        task = raw.poll(timeout=5)
        raw.complete(task, [{"type": "complete_workflow", "result": payloads.envelope({"n": 2 ** 53 + 1})}])

    worker = threading.Thread(target=finish)
    started = time.monotonic()
    worker.start()
    # poll_interval 20 s: a describe poll would answer after 20 s; the history wait answers at once
    assert client.get_workflow_handle("wf-wait").result(poll_interval=20, timeout=15) == {"n": 2 ** 53 + 1}
    assert time.monotonic() - started < 5
    worker.join(5)
    assert metrics.routes.count("/workflows/{id}") == 1  # one describe, then history reads only
    assert 2 <= metrics.routes.count("/workflows/{id}/runs/{runId}/history") <= 6


def test_result_raises_a_failure_recorded_while_waiting(dev_server: DevServer) -> None:
    raw = Raw(dev_server.url)
    client = Client(dev_server.url, control_plane_transport="stdlib")
    raw.start("wf-kill")
    timer = threading.Timer(0.3, lambda: raw.ok("POST", "/workflows/wf-kill/terminate", {"reason": "ops"}))
    timer.start()
    started = time.monotonic()
    with pytest.raises(errors.WorkflowTerminated, match="ops"):
        client.get_result("wf-kill", poll_interval=20, timeout=15)
    assert time.monotonic() - started < 5
    timer.join()


def _token(sequence: int) -> str:
    return base64.b64encode(str(sequence).encode()).decode()


def _event(sequence: int, kind: str, payload: Any = None) -> Dict[str, Any]:
    return {"sequence": sequence, "event_type": kind, "payload": payload or {}}


@responses.activate
def test_the_wait_asks_for_events_after_the_last_sequence_seen() -> None:
    client = Client(BASE, transport_retries=1, control_plane_transport="requests")
    history = f"{API}/workflows/wf1/runs/r1/history"
    responses.get(f"{API}/workflows/wf1", json={"workflow_id": "wf1", "run_id": "r1", "status": "running"})
    responses.get(history, json={"events": [_event(1, "StartAccepted"), _event(2, "WorkflowStarted")],
                                 "next_page_token": None})
    # a server that ignores the token sends old events again: they are not news
    responses.get(history, json={"events": [_event(2, "WorkflowStarted"), _event(3, "ActivityScheduled")]})
    responses.get(history, json={"events": [_event(4, "WorkflowCompleted", {
        "output": payloads.encode("done"), "payload_codec": "avro"})]})
    assert client.get_result("wf1", timeout=5, poll_interval=5) == "done"
    queries = [parse_qs(urlsplit(call.request.url).query) for call in responses.calls[1:]]
    assert all(q["wait_new_event"] == ["1"] for q in queries)
    assert [q.get("next_page_token") for q in queries] == [None, [_token(2)], [_token(3)]]
    assert len(responses.calls) == 4  # one describe, three history reads


@responses.activate
def test_a_server_refusing_the_wait_is_polled_by_describe() -> None:
    client = Client(BASE, transport_retries=1, control_plane_transport="requests")
    responses.get(f"{API}/workflows/wf1", json={"workflow_id": "wf1", "run_id": "r1", "status": "running"})
    responses.get(f"{API}/workflows/wf1", json={"workflow_id": "wf1", "run_id": "r1", "status": "running"})
    responses.get(f"{API}/workflows/wf1", json={"workflow_id": "wf1", "run_id": "r1", "status": "completed",
                                                "output_envelope": payloads.envelope(7)})
    responses.get(f"{API}/workflows/wf1/runs/r1/history", status=422,
                  json={"reason": "validation_failed", "message": "wait_new_event is not a boolean"})
    assert client.get_result("wf1", timeout=5, poll_interval=0.01) == 7
    paths = [urlsplit(call.request.url).path for call in responses.calls]
    assert paths.count("/api/workflows/wf1/runs/r1/history") == 1 and paths.count("/api/workflows/wf1") == 3


@responses.activate
def test_a_server_that_does_not_hold_the_read_is_read_every_poll_interval() -> None:
    client = Client(BASE, transport_retries=1, control_plane_transport="requests")
    responses.get(f"{API}/workflows/wf1", json={"workflow_id": "wf1", "run_id": "r1", "status": "running"})
    responses.get(f"{API}/workflows/wf1/runs/r1/history", json={"events": [_event(1, "WorkflowStarted")]})
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="status='running'"):
        client.get_result("wf1", timeout=0.5, poll_interval=0.1)
    assert time.monotonic() - started < 2
    # paced: about one read per poll_interval, not a spin
    assert 3 <= len(responses.calls) <= 9


def test_a_started_handle_waits_on_its_run_without_a_describe(dev_server: DevServer) -> None:
    raw = Raw(dev_server.url)
    metrics = Counting()
    client = Client(dev_server.url, metrics=metrics, control_plane_transport="stdlib")
    handle = client.start_workflow("t", task_queue="q", workflow_id="wf-known")

    def finish() -> None:
        task = raw.poll()
        raw.complete(task, [{"type": "complete_workflow", "result": payloads.envelope("ok")}])

    worker = threading.Thread(target=finish)
    worker.start()
    assert handle.result(poll_interval=20, timeout=15) == "ok"
    worker.join(5)
    assert metrics.routes.count("/workflows/{id}") == 0  # the start gave the run: no describe
    assert 1 <= metrics.routes.count("/workflows/{id}/runs/{runId}/history") <= 3


@responses.activate
def test_a_known_run_that_continued_as_new_is_followed_by_describe() -> None:
    client = Client(BASE, transport_retries=1, control_plane_transport="requests")
    responses.get(f"{API}/workflows/wf1/runs/r1/history", json={"events": [
        _event(1, "WorkflowStarted", {"payload_codec": "avro"}), _event(2, "WorkflowContinuedAsNew")]})
    responses.get(f"{API}/workflows/wf1", json={"workflow_id": "wf1", "run_id": "r2", "status": "completed",
                                                "output_envelope": payloads.envelope(9)})
    assert client.get_result(client.get_workflow_handle("wf1", run_id="r1"), timeout=5) == 9
    paths = [urlsplit(call.request.url).path for call in responses.calls]
    assert paths == ["/api/workflows/wf1/runs/r1/history", "/api/workflows/wf1"]


@responses.activate
def test_a_known_run_the_server_does_not_know_is_reported_by_describe() -> None:
    client = Client(BASE, transport_retries=1, control_plane_transport="requests")
    responses.get(f"{API}/workflows/wf1/runs/r1/history", status=404,
                  json={"reason": "run_not_found", "message": "Workflow run not found."})
    responses.get(f"{API}/workflows/wf1", status=404,
                  json={"reason": "workflow_not_found", "message": "Workflow not found."})
    with pytest.raises(errors.ServerError):
        client.get_result(client.get_workflow_handle("wf1", run_id="r1"), timeout=5)
