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
import time
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


RELEASE = threading.Event()
STARTED = threading.Event()


@activity.defn(name="e2e.hardening.gated")
def gated(value: str) -> str:
    STARTED.set()
    assert RELEASE.wait(30)
    with _runs_lock:
        RUNS.append(value)
    return f"gated {value}"


@activity.defn(name="e2e.hardening.money")
def money() -> Dict[str, Any]:
    from decimal import Decimal

    return {"total": Decimal("12.50"), "currency": "EUR"}


@activity.defn(name="e2e.hardening.boom")
def boom(text: str) -> None:
    raise ValueError(text)


@workflow.defn(name="e2e.hardening.bad_result")
class BadResult:
    def run(self, ctx: Any) -> Any:
        import datetime

        return datetime.datetime(2026, 1, 1)
        yield  # pragma: no cover - a generator that returns at once


def test_completion_that_hits_an_outage_is_delivered_when_the_server_is_back(
        proxied: Tuple[DevServer, FaultProxy], caplog: pytest.LogCaptureFixture) -> None:
    server, proxy = proxied
    caplog.set_level(logging.WARNING, logger="sync_worker.worker")
    RELEASE.clear()
    STARTED.clear()
    queue = unique_queue("outage")
    control = Client(server.url)
    worker = make_worker(Client(proxy.url, timeout=5, connect_timeout=1), task_queue=queue, activities=[gated],
                         poll_timeout=1.0)
    before = len(RUNS)
    with RunningWorker(worker) as running:
        receipt = control.start_activity("e2e.hardening.gated", "once", task_queue=queue,
                                         start_to_close_timeout_seconds=60)
        assert STARTED.wait(10)
        proxy.go_down()  # the server "restarts" while the activity runs
        RELEASE.set()
        time.sleep(4.0)  # the completion keeps failing for 4 s: far beyond the transport's own retries
        proxy.come_up()
        assert control.get_activity_result(receipt["activity_id"], timeout=20) == "gated once"
        assert control.describe_activity(receipt["activity_id"])["attempt_count"] == 1
        assert running.stop() is None
    assert RUNS[before:] == ["once"]  # delivered once, never re-run
    assert any("completion failed" in r.getMessage() and "retrying until its lease ends" in r.getMessage()
               for r in caplog.records)


def test_unencodable_result_is_a_non_retryable_failure_naming_the_path(dev_server: DevServer) -> None:
    from sync_worker.errors import WorkflowFailed

    queue = unique_queue("decimal")
    client = Client(dev_server.url)
    worker = make_worker(client, task_queue=queue, activities=[money], poll_timeout=1.0)
    with RunningWorker(worker) as running:
        receipt = client.start_activity("e2e.hardening.money", task_queue=queue,
                                        retry_policy={"max_attempts": 5, "backoff_seconds": [0.2]})
        started = time.monotonic()
        with pytest.raises(WorkflowFailed):
            client.get_activity_result(receipt["activity_id"], timeout=10)
        assert time.monotonic() - started < 5  # at once, not after a lease timeout
        described = client.describe_activity(receipt["activity_id"])
        assert described["attempt_count"] == 1
        failure = described["failure"]
        assert failure["non_retryable"] is True and failure["type"] == "ResultNotEncodable"
        assert 'result["total"]' in failure["message"] and "Decimal" in failure["message"]
        assert running.stop() is None


def test_per_task_log_lines_in_celery_wording(dev_server: DevServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sync_worker.worker.activities")
    queue = unique_queue("tasklog")
    client = Client(dev_server.url)
    worker = make_worker(client, task_queue=queue, activities=[record, boom], poll_timeout=1.0)
    with RunningWorker(worker) as running:
        ok = client.start_activity("e2e.hardening.record", "logged", task_queue=queue)
        assert client.get_activity_result(ok["activity_id"], timeout=10) == "done logged"
        bad = client.start_activity("e2e.hardening.boom", "kaput", task_queue=queue)
        wait_for(lambda: client.describe_activity(bad["activity_id"]).get("status") in ("failed", "completed"),
                 timeout=10)
        assert running.stop() is None
    lines = [r.getMessage() for r in caplog.records if r.name == "sync_worker.worker.activities"]
    assert any(line.startswith("Task e2e.hardening.record[") and line.endswith("] received") for line in lines)
    assert any(line.startswith("Task e2e.hardening.record[") and "] succeeded in " in line
               and line.endswith("s: 'done logged'") for line in lines), lines
    raised = [line for line in lines if line.startswith("Task e2e.hardening.boom[") and "] raised: " in line]
    assert raised and raised[0].splitlines()[0].endswith("raised: ValueError('kaput')"), raised
    assert "Traceback (most recent call last)" in raised[0] and "ValueError: kaput" in raised[0]


def test_failing_workflow_tasks_are_logged_and_explained_by_result(dev_server: DevServer,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sync_worker.worker.workflow")
    queue = unique_queue("badresult")
    client = Client(dev_server.url)
    worker = make_worker(client, task_queue=queue, workflows=[BadResult], poll_timeout=1.0)
    with RunningWorker(worker) as running:
        handle = client.start_workflow("e2e.hardening.bad_result", task_queue=queue)
        wait_for(lambda: client.describe_workflow(handle.workflow_id).raw.get("last_task_failure"), timeout=10)
        time.sleep(1.0)  # let the server retry the task a few times
        with pytest.raises(TimeoutError) as caught:
            handle.result(timeout=1)
        assert "keep failing" in str(caught.value) and "datetime" in str(caught.value)
        assert running.stop() is None
    warnings = [r.getMessage() for r in caplog.records if "e2e.hardening.bad_result" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once per run and reason, then throttled
    assert "datetime" in warnings[0] and "the run stays open" in warnings[0]


def test_readiness_returns_within_seconds_of_the_server(proxied: Tuple[DevServer, FaultProxy]) -> None:
    _server, proxy = proxied
    queue = unique_queue("ready")
    worker = make_worker(Client(proxy.url, timeout=10, connect_timeout=1), task_queue=queue, activities=[record],
                         workflows=[RecordFlow], poll_timeout=20.0)  # the default 60 s heartbeat interval
    with RunningWorker(worker) as running:
        wait_for(lambda: worker.status().ready, timeout=10)
        proxy.go_down()
        wait_for(lambda: not worker.status().ready, timeout=10)
        time.sleep(10.0)  # long enough for every role's back-off to reach 8-16 s
        proxy.come_up()
        back = time.monotonic()
        wait_for(lambda: worker.status().ready, timeout=20, interval=0.1)
        recovered = time.monotonic() - back
        assert recovered < 5.0, (recovered, worker.status())
        assert running.stop() is None


def test_a_server_restart_is_not_reported_as_a_proxy_cut(proxied: Tuple[DevServer, FaultProxy],
                                                         caplog: pytest.LogCaptureFixture) -> None:
    _server, proxy = proxied
    caplog.set_level(logging.WARNING, logger="sync_worker.worker.poll")
    queue = unique_queue("restart")
    worker = make_worker(Client(proxy.url, timeout=10, connect_timeout=1), task_queue=queue, activities=[record],
                         poll_timeout=20.0)
    with RunningWorker(worker) as running:
        wait_for(lambda: worker.status().ready, timeout=10)
        time.sleep(0.7)  # the polls are held by the server
        proxy.go_down()  # open polls are cut, new connections refused
        wait_for(lambda: any("activity poll error" in r.getMessage() for r in caplog.records), timeout=10)
        time.sleep(1.5)
        proxy.come_up()
        wait_for(lambda: worker.status().ready, timeout=10)
        assert running.stop() is None
    assert not [r for r in caplog.records if "Check proxy" in r.getMessage()]
