"""The runtime under a misbehaving server (issue 9), over real sockets: a fault proxy in front of
the real dev server hands out malformed tasks and simulates outages.

* malformed tasks are never run, counted, logged once with what was missing, and reported to
  the server when they can be identified;
* task outcomes that hit an outage are retried until the server is back (no re-run);
* readiness returns within seconds of the server, not after a full heartbeat interval.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from sync_worker import activity, workflow
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.worker import InMemoryMetrics

from .._misbehaving import FaultProxy, RawRequest
from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for

RUNS: List[str] = []
_runs_lock = threading.Lock()


@activity.defn(name="e2e.hardening.record")
def record(value: str) -> str:
    with _runs_lock:
        RUNS.append(value)
    return f"done {value}"


@workflow.defn(name="e2e.hardening.flow")
class RecordFlow:
    def run(self, ctx: Any, value: str) -> Any:
        result = yield ctx.schedule_activity("e2e.hardening.record", [value])
        return result


@pytest.fixture
def proxied() -> Iterator[Tuple[DevServer, FaultProxy]]:
    with DevServer(workflow_task_lease_seconds=30) as server:
        proxy = FaultProxy(server.url)
        try:
            yield server, proxy
        finally:
            proxy.close()


def _scripted(answers: List[Optional[Dict[str, Any]]]) -> Any:
    """A poll override that hands out ``answers`` (tasks; ``None`` = pass through) in order."""
    lock = threading.Lock()

    def answer(request: RawRequest) -> Optional[Tuple[int, bytes]]:
        with lock:
            if not answers:
                return None
            task = answers.pop(0)
        if task is None:
            return None
        return 200, json.dumps({"task": task, "protocol_version": "1.20"}).encode()

    return answer


def test_malformed_activity_tasks_are_never_run(proxied: Tuple[DevServer, FaultProxy],
                                                caplog: pytest.LogCaptureFixture) -> None:
    server, proxy = proxied
    caplog.set_level(logging.WARNING, logger="sync_worker.worker")
    queue = unique_queue("malformed")
    base = {"payload_codec": "avro", "arguments": {"codec": "avro", "blob": ""}, "task_queue": queue}
    proxy.override("POST", "/api/worker/activity-tasks/poll", _scripted([
        {**base, "task_id": "at-no-attempt", "activity_type": "e2e.hardening.record"},  # ran before the fix
        {**base, "activity_type": "e2e.hardening.record"},  # only a type: failed to an empty URL before
        {**base, "task_id": "at-no-type", "activity_attempt_id": "att-1"},  # identifiable: reported
    ]))
    client = Client(proxy.url, timeout=10)
    metrics = InMemoryMetrics()
    worker = make_worker(client, task_queue=queue, activities=[record], poll_timeout=1.0, metrics=metrics)
    before = len(RUNS)
    with RunningWorker(worker) as running:
        wait_for(lambda: metrics.counter("durable_workflow_worker_tasks", outcome="malformed") == 3, timeout=15)
        receipt = Client(server.url).start_activity("e2e.hardening.record", "real", task_queue=queue)
        assert Client(server.url).get_activity_result(receipt["activity_id"], timeout=15) == "done real"
        assert running.stop() is None
    assert RUNS[before:] == ["real"]  # none of the malformed tasks ran
    warnings = [r.getMessage() for r in caplog.records if "malformed activity task" in r.getMessage()]
    assert len(warnings) == 3, warnings
    assert any("at-no-attempt" in w and "missing activity_attempt_id" in w and "not reported" in w for w in warnings)
    assert any("<no id>" in w and "missing task_id" in w for w in warnings)
    assert any("at-no-type" in w and "missing activity_type" in w for w in warnings)
    reports = [r for r in proxy.server.requests if r.path.startswith("/api/worker/activity-tasks/")
               and r.path.endswith("/fail")]
    assert [r.path for r in reports] == ["/api/worker/activity-tasks/at-no-type/fail"]
    failure = reports[0].json()["failure"]
    assert failure["type"] == "MalformedTask" and failure["non_retryable"] is True
    assert "missing activity_type" in failure["message"]
    assert not any(r.path.startswith("/api/worker/activity-tasks//") for r in proxy.server.requests)


def test_malformed_workflow_tasks_are_never_run(proxied: Tuple[DevServer, FaultProxy],
                                                caplog: pytest.LogCaptureFixture) -> None:
    _server, proxy = proxied
    caplog.set_level(logging.WARNING, logger="sync_worker.worker")
    queue = unique_queue("malformed-wf")
    proxy.override("POST", "/api/worker/workflow-tasks/poll", _scripted([
        {"workflow_type": "anything", "payload_codec": "avro", "history_events": []},  # no task_id: crashed before
        {"task_id": "wft-no-type", "workflow_task_attempt": 1, "payload_codec": "avro", "history_events": []},
    ]))
    client = Client(proxy.url, timeout=10)
    metrics = InMemoryMetrics()
    worker = make_worker(client, task_queue=queue, workflows=[RecordFlow], activities=[record], poll_timeout=1.0,
                         metrics=metrics)
    with RunningWorker(worker) as running:
        wait_for(lambda: metrics.counter("durable_workflow_worker_tasks", outcome="malformed") == 2, timeout=15)
        assert metrics.counter("durable_workflow_worker_tasks", outcome="crashed") == 0
        control = Client(_server.url)
        handle = control.start_workflow("e2e.hardening.flow", "wf", task_queue=queue)
        assert handle.result(timeout=15) == "done wf"  # real tasks behind the malformed ones still run
        assert running.stop() is None
    warnings = [r.getMessage() for r in caplog.records if "malformed workflow task" in r.getMessage()]
    assert len(warnings) == 2 and any("missing task_id" in w for w in warnings)
    assert [r.path for r in proxy.server.requests if r.path.endswith("/fail")] == [
        "/api/worker/workflow-tasks/wft-no-type/fail"]
