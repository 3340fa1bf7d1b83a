"""Poll back-off while the server is down, recovery without a restart, and status states."""

from __future__ import annotations

import logging
import socket
from typing import Any, List

import pytest

from sync_worker import activity
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from sync_worker.worker import InMemoryMetrics, Worker, WorkerState

from ._worker_support import RunningWorker, unique_queue, wait_for


@activity.defn(name="e2e.recovery.echo")
def echo(value: Any) -> Any:
    return value


def _port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_registration_against_nothing_listening_fails_without_polling() -> None:
    client = Client(f"http://127.0.0.1:{_free_port()}", transport_retries=1, connect_timeout=1.0)
    metrics = InMemoryMetrics()
    worker = Worker(client, task_queue=unique_queue(), activities=[echo], metrics=metrics)
    with pytest.raises(RuntimeError, match="Cannot reach the Durable Workflow server: unable to read http"):
        worker.run()
    assert worker.state is WorkerState.FAILED
    assert metrics.polls() == []
    worker.stop()  # no deregistration is attempted for a failed registration
    client.close()


@pytest.mark.slow
def test_backoff_schedule_then_recovery_without_restart(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sync_worker.worker.poll")
    db = str(tmp_path / "dev.sqlite3")
    queue = unique_queue()
    metrics = InMemoryMetrics()
    server = DevServer(port=0, db=db)
    server.__enter__()
    port = _port_of(server.url)
    client = Client(server.url, transport_retries=1, connect_timeout=1.0, timeout=5.0)
    worker = Worker(client, task_queue=queue, activities=[echo], poll_timeout=1.0, metrics=metrics)
    assert worker.status().state is WorkerState.STARTING
    assert not worker.status().live and not worker.status().ready
    restarted = None
    try:
        with RunningWorker(worker) as running:
            wait_for(lambda: worker.status().ready)
            assert worker.status().live

            server.__exit__(None, None, None)  # the server goes away under the worker
            server = None

            def errors() -> List[Any]:
                return [e for e in metrics.polls("activity") if e.outcome == "error"]

            wait_for(lambda: len(errors()) >= 3, timeout=15)
            status = worker.status()
            assert status.state is WorkerState.RUNNING
            # the activity poller failed, and the heartbeat probing the server with it (issue 9)
            assert not status.ready and status.ready_reason in ("last_exchange_failed:activity",
                                                                "last_exchange_failed:heartbeat")
            assert status.live, status.live_reason
            role = status.role("activity")
            assert role is not None and role.consecutive_failures >= 3

            events = errors()
            durations = metrics.histogram("durable_workflow_worker_poll_duration_seconds",
                                          task_kind="activity", outcome="error")
            # delay before poll i+1 = gap between their ends - the duration of poll i+1
            for index, ceiling in enumerate((1.0, 2.0)):
                delay = events[index + 1].at - events[index].at - durations[index + 1]
                assert ceiling / 2 - 0.05 <= delay <= ceiling + 0.2, (index, delay)

            restarted = DevServer(port=port, db=db)
            restarted.__enter__()
            wait_for(lambda: worker.status().ready, timeout=10)  # next poll succeeds: no restart needed
            receipt = client.start_activity("e2e.recovery.echo", {"back": True}, task_queue=queue)
            assert client.get_activity_result(receipt["activity_id"], timeout=10) == {"back": True}
            assert running.stop() is None
        assert worker.status().state is WorkerState.STOPPED
        warnings = [r for r in caplog.records if "activity poll error" in r.getMessage()]
        # the first failure is logged at once; identical ones are throttled
        assert 1 <= len(warnings) < len(events)
        assert "route=/worker/activity-tasks/poll" in warnings[0].getMessage()
    finally:
        if server is not None:
            server.__exit__(None, None, None)
        if restarted is not None:
            restarted.__exit__(None, None, None)
        client.close()
