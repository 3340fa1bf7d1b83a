"""Long polls really block, wake as soon as work is ready, and 200 of them held at once do not
delay other requests."""

from __future__ import annotations

import base64
import http.client
import json
import threading
import time
from typing import Any, List

from sync_worker.devserver import DevServer
from tests.unit.devserver._raw import WORKER, Raw


def _poll(server: DevServer, queue: str, timeout: int, results: List[Any], started: threading.Barrier) -> None:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        worker_id = f"w-{threading.get_ident()}"
        Raw(server.url).ok("POST", "/worker/register", {"worker_id": worker_id, "task_queue": queue}, plane="worker")
        body = json.dumps({"worker_id": worker_id, "task_queue": queue, "timeout_seconds": timeout})
        started.wait()
        t0 = time.monotonic()
        conn.request("POST", "/api/worker/workflow-tasks/poll", body=body,
                     headers={"Content-Type": "application/json", **WORKER})
        resp = conn.getresponse()
        results.append((resp.status, json.loads(resp.read())["task"], time.monotonic() - t0))
    finally:
        conn.close()


def test_200_concurrent_long_polls_do_not_delay_other_requests(dev_server: DevServer) -> None:
    count = 200
    results: List[Any] = []
    barrier = threading.Barrier(count + 1)
    threads = [threading.Thread(target=_poll, args=(dev_server, "idle-queue", 2, results, barrier))
               for _ in range(count)]
    for t in threads:
        t.start()
    barrier.wait()
    time.sleep(0.5)  # let every poll reach the server and block
    raw = Raw(dev_server.url)
    t0 = time.monotonic()
    assert raw.ok("GET", "/health")["status"] == "serving"
    raw.start("wf-busy")
    assert raw.ok("GET", "/workflows/wf-busy")["status"] == "pending"
    control_elapsed = time.monotonic() - t0
    for t in threads:
        t.join(30)
    assert control_elapsed < 1.0, control_elapsed
    assert len(results) == count
    assert all(status == 200 and task is None for status, task, _ in results)
    # they were real long polls: each one waited out (most of) its timeout
    assert min(elapsed for _, _, elapsed in results) > 1.0


def test_poll_returns_as_soon_as_a_task_is_ready(dev_server: DevServer) -> None:
    results: List[Any] = []
    barrier = threading.Barrier(2)
    poller = threading.Thread(target=_poll, args=(dev_server, "q", 20, results, barrier))
    poller.start()
    barrier.wait()
    time.sleep(0.3)
    Raw(dev_server.url).start("wf-wake")
    poller.join(10)
    assert results, "the poll did not return"
    status, task, elapsed = results[0]
    assert status == 200 and task["workflow_id"] == "wf-wake"
    assert elapsed < 2.0


def test_stop_releases_held_polls_quickly() -> None:
    server = DevServer().start()
    results: List[Any] = []
    barrier = threading.Barrier(6)
    threads = [threading.Thread(target=_poll, args=(server, "q", 30, results, barrier)) for _ in range(5)]
    for t in threads:
        t.start()
    barrier.wait()
    time.sleep(0.3)
    t0 = time.monotonic()
    server.stop()
    server.stop()  # idempotent
    for t in threads:
        t.join(10)
    assert time.monotonic() - t0 < 5.0
    assert not any(t.is_alive() for t in threads)


def test_abandoned_poll_never_takes_a_lease(dev_server: DevServer) -> None:
    import socket

    Raw(dev_server.url).ok("POST", "/worker/register", {"worker_id": "gone", "task_queue": "q"}, plane="worker")
    body = json.dumps({"worker_id": "gone", "task_queue": "q", "timeout_seconds": 20}).encode()
    request = (b"POST /api/worker/workflow-tasks/poll HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"X-Durable-Workflow-Protocol-Version: 1.20\r\nContent-Length: " + str(len(body)).encode()
               + b"\r\n\r\n" + body)
    with socket.create_connection((dev_server.host, dev_server.port)) as sock:
        sock.sendall(request)
        time.sleep(0.3)  # the poll is parked server-side; now the caller hangs up
    time.sleep(0.1)
    raw = Raw(dev_server.url)
    raw.start("wf-after-hangup")
    task = raw.poll(worker_id="alive", timeout=5)
    assert task is not None and task["lease_owner"] == "alive"


def test_deregistered_worker_is_never_leased_a_task(dev_server: DevServer) -> None:
    raw = Raw(dev_server.url)
    token = raw.ok("POST", "/worker/register", {"worker_id": "w-old", "task_queue": "q"},
                   plane="worker")["registration_token"]
    raw.ok("POST", "/worker/registrations/w-old/deregister", {"registration_token": token}, plane="worker")
    raw.start("wf-1")
    # As the real server: a poll without a live registration is refused (412), so the worker knows.
    refused = raw.call("POST", "/worker/workflow-tasks/poll", {"worker_id": "w-old", "task_queue": "q",
                                                                "timeout_seconds": 1}, plane="worker")
    assert (refused.status_code, refused.json()["reason"]) == (412, "worker_not_registered")
    assert raw.poll(worker_id="w-new", timeout=1)["workflow_id"] == "wf-1"


def test_history_wait_new_event_blocks_until_the_run_s_next_event(dev_server: DevServer) -> None:
    """``GET .../history?wait_new_event=1&next_page_token=<after>`` (the real server's history follow,
    HistoryController::show through LongPoller::until) answers only when an event after the token exists."""
    raw = Raw(dev_server.url)
    run_id = raw.start("wf-follow")["run_id"]
    path = f"/workflows/wf-follow/runs/{run_id}/history"
    seen = raw.ok("GET", path)["events"]
    after = base64.b64encode(str(seen[-1]["sequence"]).encode()).decode()
    answers: List[Any] = []

    def follow() -> None:
        t0 = time.monotonic()
        page = raw.ok("GET", f"{path}?wait_new_event=1&next_page_token={after}")
        answers.append((page["events"], time.monotonic() - t0))

    waiter = threading.Thread(target=follow)
    waiter.start()
    time.sleep(0.5)
    assert not answers  # still waiting: nothing after the token yet
    t0 = time.monotonic()
    raw.ok("POST", "/workflows/wf-follow/terminate", {"reason": "done"})
    waiter.join(10)
    events, waited = answers[0]
    assert waited >= 0.5 and time.monotonic() - t0 < 2.0
    assert events and all(e["sequence"] > seen[-1]["sequence"] for e in events)
    assert events[-1]["event_type"] == "WorkflowTerminated"
    # events already after the token: no wait at all; without wait_new_event: an empty page at once
    t0 = time.monotonic()
    assert raw.ok("GET", f"{path}?wait_new_event=1")["events"][0]["sequence"] == 1
    last = base64.b64encode(str(events[-1]["sequence"]).encode()).decode()
    assert raw.ok("GET", f"{path}?next_page_token={last}")["events"] == []
    assert time.monotonic() - t0 < 1.0


def test_history_wait_new_event_is_validated_as_the_real_server_does(dev_server: DevServer) -> None:
    """The real server validates ``wait_new_event`` as ``['nullable', 'boolean']``: ``0``/``1`` (or absent)
    pass, the word ``false`` (or ``true``) in a query string is a 422 naming the field (what our CLI used
    to send)."""
    raw = Raw(dev_server.url)
    run_id = raw.start("wf-bool")["run_id"]
    path = f"/workflows/wf-bool/runs/{run_id}/history"
    refused = raw.call("GET", f"{path}?wait_new_event=false")
    assert refused.status_code == 422
    assert refused.json()["reason"] == "validation_failed"
    assert "wait_new_event" in refused.json()["errors"]
    for word in ("true", "yes", "2", "01"):  # Laravel's rule takes "1"/"0" as strings, nothing else
        assert raw.call("GET", f"{path}?wait_new_event={word}").status_code == 422, word
    last = base64.b64encode(str(raw.ok("GET", path)["events"][-1]["sequence"]).encode()).decode()
    t0 = time.monotonic()
    assert raw.ok("GET", f"{path}?wait_new_event=0&next_page_token={last}")["events"] == []
    # empty is null to Laravel (ConvertEmptyStringsToNull), which "nullable" lets through: no wait
    assert raw.ok("GET", f"{path}?wait_new_event=&next_page_token={last}")["events"] == []
    assert time.monotonic() - t0 < 1.0  # 0 (and null) is "do not wait"
