"""Failures name what failed: a standalone activity's or a workflow's failure type and message."""

from __future__ import annotations

import pytest
import responses

from sync_worker import errors
from sync_worker.client import Client

API = "http://dw.test/api"


@pytest.fixture
def client() -> Client:
    return Client("http://dw.test", transport_retries=1, control_plane_transport="requests")  # responses mocks


@responses.activate
def test_activity_failure_from_describe(client: Client) -> None:
    responses.get(f"{API}/activities/a1", json={
        "activity_id": "a1", "status": "failed", "workflow_run_id": "r1",
        "failure": {"type": "CardDeclined", "message": "card declined", "non_retryable": True}})
    with pytest.raises(errors.StandaloneActivityFailed) as caught:
        client.get_activity_result("a1", timeout=5)
    exc = caught.value
    assert str(exc) == "standalone activity a1 failed: CardDeclined: card declined"
    assert (exc.failure_type, exc.failure_message, exc.exception_class) == ("CardDeclined", "card declined",
                                                                           "CardDeclined")
    assert isinstance(exc, errors.WorkflowFailed) and exc.failure["non_retryable"] is True


@responses.activate
def test_activity_failure_from_the_host_run_history(client: Client) -> None:
    """A server whose describe omits the failure (as the published client assumes): read the host run."""
    responses.get(f"{API}/activities/a2", json={"activity_id": "a2", "status": "failed", "workflow_run_id": "r2"})
    responses.get(f"{API}/workflows/a2/runs/r2/history", json={"events": [
        {"event_type": "ActivityFailed", "payload": {"failure": {"exception_type": "TimeoutError",
                                                                 "message": "upstream took 30 s"}}},
        {"event_type": "WorkflowFailed", "payload": {"message": "activity failed"}}]})
    with pytest.raises(errors.StandaloneActivityFailed, match="a2 failed: TimeoutError: upstream took 30 s"):
        client.get_activity_result(client.get_activity_handle("a2"), timeout=5)


@responses.activate
def test_activity_failure_without_any_detail_still_says_which(client: Client) -> None:
    responses.get(f"{API}/activities/a3", json={"activity_id": "a3", "status": "failed"})
    with pytest.raises(errors.StandaloneActivityFailed) as caught:
        client.get_activity_result("a3", timeout=5)
    assert str(caught.value) == "standalone activity a3 failed" and caught.value.failure is None


@responses.activate
def test_workflow_failure_names_type_and_message(client: Client) -> None:
    responses.get(f"{API}/workflows/wf1", json={"workflow_id": "wf1", "run_id": "r1", "status": "failed"})
    responses.get(f"{API}/workflows/wf1/runs/r1/history", json={"events": [
        {"event_type": "WorkflowFailed", "payload": {"message": "no stock", "exception_class": "OutOfStock"}}]})
    with pytest.raises(errors.WorkflowFailed) as caught:
        client.get_result("wf1", timeout=5)
    assert str(caught.value) == "workflow wf1 failed: OutOfStock: no stock"
    assert caught.value.exception_class == "OutOfStock"
