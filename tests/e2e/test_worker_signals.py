"""Warm and cold shutdown of ``sync-worker run`` with real signals from another process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, Dict, Iterator

import pytest

from sync_worker.client import Client
from sync_worker.worker.cli import EXIT_COLD_STOP, EXIT_OK

from ._worker_support import unique_queue, wait_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WATCHDOG_SECONDS = 30


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


def start_worker(url: str, queue: str) -> subprocess.Popen[str]:
    env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL=url, PYTHONPATH=REPO)
    return subprocess.Popen(
        [sys.executable, "-m", "sync_worker.cli", "run", "tests.e2e._signal_app:make_worker",
         "-Q", queue, "-l", "INFO"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def wait_exit(process: subprocess.Popen[str]) -> int:
    try:
        return process.wait(WATCHDOG_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        output = process.communicate()[0]
        raise AssertionError(f"worker did not exit within {WATCHDOG_SECONDS}s:\n{output}")


def worker_rows(client: Client, queue: str) -> Dict[str, Any]:
    return {w["worker_id"]: w for w in client.list_workers(task_queue=queue)["workers"]}


def wait_running(client: Client, activity_id: str) -> None:
    # the activity heartbeats once when it starts: the worker has really accepted it
    wait_for(lambda: client.describe_activity(activity_id).get("last_heartbeat_at"), timeout=20)


def test_warm_shutdown_finishes_the_running_activity(client: Client, dev_server_session: Any) -> None:
    queue = unique_queue("signals")
    process = start_worker(dev_server_session.url, queue)
    try:
        receipt = client.start_activity("signals.sleep", 1.5, task_queue=queue)
        wait_running(client, receipt["activity_id"])
        os.kill(process.pid, signal.SIGTERM)
        code = wait_exit(process)
        output = process.communicate()[0]
        assert code == EXIT_OK, output
        assert client.get_activity_result(receipt["activity_id"], timeout=5) == "slept 1.5"
        rows = worker_rows(client, queue)
        assert [row["status"] for row in rows.values()] == ["deregistered"], rows
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_second_signal_is_a_cold_stop(client: Client, dev_server_session: Any) -> None:
    queue = unique_queue("signals")
    process = start_worker(dev_server_session.url, queue)
    try:
        receipt = client.start_activity("signals.sleep", 60, task_queue=queue)
        wait_running(client, receipt["activity_id"])
        os.kill(process.pid, signal.SIGTERM)
        time.sleep(0.3)
        started = time.monotonic()
        os.kill(process.pid, signal.SIGINT)
        code = wait_exit(process)
        output = process.communicate()[0]
        assert code == EXIT_COLD_STOP, output
        assert time.monotonic() - started < 10  # did not wait for the 60 s activity
        described = client.describe_activity(receipt["activity_id"])
        assert described["result"] is None and described["activity_status"] == "running"
        rows = worker_rows(client, queue)
        assert [row["status"] for row in rows.values()] == ["active"]  # registration kept
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_sigquit_is_a_cold_stop_at_once(client: Client, dev_server_session: Any) -> None:
    queue = unique_queue("signals")
    process = start_worker(dev_server_session.url, queue)
    try:
        receipt = client.start_activity("signals.sleep", 60, task_queue=queue)
        wait_running(client, receipt["activity_id"])
        os.kill(process.pid, signal.SIGQUIT)
        assert wait_exit(process) == EXIT_COLD_STOP, process.communicate()[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
