from __future__ import annotations

from typing import Any, Dict, List

import pytest

from sync_worker.errors import ServerError, TransportError, Unauthorized
from sync_worker.worker.deregistration import DeregistrationUnconfirmed, deregister, fenced_transport_delay
from sync_worker.worker.pollers import poll_timeout_seconds
from sync_worker.worker.registration import (
    ProcessMetrics,
    registration_body,
    valid_registration_token,
    worker_capabilities,
)

TOKEN = "0123456789abcdef0123456789abcdef"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: List[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class DeregClient:
    def __init__(self, outcomes: List[Any]) -> None:
        self.outcomes = list(outcomes)
        self.calls: List[Dict[str, Any]] = []

    def _next(self) -> Dict[str, Any]:
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[no-any-return]

    def deregister_worker_fenced(self, worker_id: str, token: str, *, timeout: float) -> Dict[str, Any]:
        self.calls.append({"kind": "fenced", "worker_id": worker_id, "token": token, "timeout": timeout})
        return self._next()

    def deregister_worker_legacy(self, worker_id: str, *, timeout: float) -> Dict[str, Any]:
        self.calls.append({"kind": "legacy", "worker_id": worker_id, "timeout": timeout})
        return self._next()


def lock_pressure(delay: int = 2, token: str = TOKEN) -> ServerError:
    return ServerError(503, {"reason": "backend_lock_pressure", "operation": "deregister_worker",
                             "outcome": "unknown", "worker_id": "w1", "registration_token": token,
                             "retryable": True, "retry_after_seconds": delay})


def run(client: DeregClient, clock: Clock, token: Any = TOKEN, deadline: float = 30.0) -> Dict[str, Any]:
    return deregister(client, worker_id="w1", registration_token=token, deadline=deadline,
                      clock=clock, sleep=clock.sleep)


def test_transport_delays() -> None:
    assert [fenced_transport_delay(n) for n in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_fenced_retries_same_token_with_protocol_delays() -> None:
    receipt = {"worker_id": "w1", "outcome": "deregistered", "registration_token": TOKEN}
    client = DeregClient([TransportError("x"), TransportError("x"), lock_pressure(2), receipt])
    clock = Clock()
    assert run(client, clock) == receipt
    assert clock.sleeps == [0.1, 0.2, 2.0]
    assert {c["token"] for c in client.calls} == {TOKEN}
    # every attempt gets the remaining budget of the original deadline
    assert [round(c["timeout"], 2) for c in client.calls] == [30.0, 29.9, 29.7, 27.7]


def test_fenced_gives_up_when_the_delay_passes_the_deadline() -> None:
    client = DeregClient([lock_pressure(5)])
    clock = Clock()
    with pytest.raises(DeregistrationUnconfirmed, match="unconfirmed"):
        run(client, clock, deadline=3.0)
    assert len(client.calls) == 1 and clock.sleeps == []


def test_fenced_non_transient_refusals_raise_at_once() -> None:
    for error in (Unauthorized(401, {}), ServerError(200, {"reason": "invalid_worker_deregistration_response"}),
                  lock_pressure(2, token="f" * 32), ServerError(409, {"reason": "registration_superseded"})):
        client = DeregClient([error])
        with pytest.raises(ServerError) as caught:
            run(client, Clock())
        assert caught.value is error
        assert len(client.calls) == 1


def test_legacy_is_one_attempt() -> None:
    client = DeregClient([TransportError("x")])
    with pytest.raises(DeregistrationUnconfirmed):
        run(client, Clock(), token=None)
    assert [c["kind"] for c in client.calls] == ["legacy"]
    client = DeregClient([{"worker_id": "w1", "outcome": "already_deregistered"}])
    assert run(client, Clock(), token=None)["outcome"] == "already_deregistered"


def test_no_request_when_the_drain_used_the_deadline() -> None:
    client = DeregClient([])
    clock = Clock()
    clock.now = 31.0
    with pytest.raises(DeregistrationUnconfirmed, match="during drain"):
        run(client, clock)
    assert client.calls == []


def test_registration_token_validation() -> None:
    ack = {"worker_id": "w1", "registered": True, "registration_token": TOKEN}
    assert valid_registration_token(ack, "w1") == TOKEN
    assert valid_registration_token(dict(ack, registration_token=TOKEN.upper()), "w1") is None
    assert valid_registration_token(dict(ack, registration_token=TOKEN[:-1]), "w1") is None
    assert valid_registration_token(dict(ack, worker_id="w2"), "w1") is None
    assert valid_registration_token(dict(ack, registered="yes"), "w1") is None


def test_capabilities_are_honest() -> None:
    # worker_sessions always (sessions pin activities: an activity-only worker holds them too), in
    # the published SDK's place: after message_streams, before sticky_execution (protocol §3.1)
    assert worker_capabilities(has_workflows=False, server_capabilities={"query_tasks": True},
                               sticky=True) == ["worker_sessions"]
    assert worker_capabilities(has_workflows=True, server_capabilities={"query_tasks": True},
                               workflow_capabilities=["durable_selection"]) == [
        "durable_selection", "query_tasks", "message_streams", "worker_sessions"]
    assert worker_capabilities(has_workflows=True, server_capabilities={"query_tasks": "yes"}, sticky=True) == [
        "message_streams", "worker_sessions", "sticky_execution"]


def test_registration_body_shape() -> None:
    body = registration_body(
        worker_id="w1", task_queue="q", workflow_types=["wf"], activity_types=["a", "b"],
        fingerprints={"wf": "sha256:00"}, command_contracts={"wf": {}}, capabilities=["query_tasks"],
        build_id=None, max_concurrent_workflow_tasks=3, max_concurrent_activity_tasks=4,
        task_slots={"workflow_available": 3, "activity_available": 4, "session_available": 0},
        process_metrics=ProcessMetrics().sample(),
    )
    assert body["runtime"] == "python"
    assert body["supported_activity_types"] == ["a", "b"]
    assert body["capability_manifest"]["worker_sessions"] == {
        "supported": True, "minimum_protocol_version": "1.18", "implementation": "typed_worker_session"}
    assert body["max_concurrent_worker_sessions"] == 10
    assert body["capability_manifest"]["sticky_execution"]["supported"] is False
    assert "build_id" not in body
    metrics = body["process_metrics"]
    assert metrics["process_id"] > 0 and metrics["process_started_at"].endswith("Z")
    assert 0.0 <= metrics["cpu_percent"] <= 100.0


def test_poll_timeout_seconds() -> None:
    assert poll_timeout_seconds(35.0) == 35
    assert poll_timeout_seconds(35.2) == 36
    assert poll_timeout_seconds(0.5) == 0
    assert poll_timeout_seconds(500) == 60
