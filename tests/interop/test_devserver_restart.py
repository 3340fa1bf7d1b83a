"""A file-backed dev server killed (SIGKILL) mid-run and restarted on the same file completes the run:
timers, pending activities and the run itself are durable."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator, List

import pytest
import requests
from durable_workflow import Client, Worker, activity, workflow

CONTROL = {"X-Durable-Workflow-Control-Plane-Version": "2"}


@activity.defn(name="restart.shout")
def shout(text: str) -> str:
    return text.upper()


@workflow.defn(name="restart.timer_then_activity")
class TimerThenActivity:
    def run(self, ctx: Any, text: str) -> Any:
        yield ctx.start_timer(2)
        loud = yield ctx.schedule_activity("restart.shout", [text])
        return {"loud": loud}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _ServerProcess:
    def __init__(self, port: int, db: Path) -> None:
        self.port, self.db = port, db
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from sync_worker.cli import main; main()", "devserver", "--port", str(self.port),
             "--db", str(self.db), "--log-level", "WARNING"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/api/health", timeout=1).status_code == 200:
                    return
            except requests.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("dev server subprocess did not come up")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def server_process(tmp_path: Path) -> Iterator[_ServerProcess]:
    server = _ServerProcess(_free_port(), tmp_path / "devserver.sqlite3")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _event_types(url: str, workflow_id: str) -> List[str]:
    desc = requests.get(f"{url}/api/workflows/{workflow_id}", headers=CONTROL, timeout=5).json()
    events = requests.get(f"{url}/api/workflows/{workflow_id}/runs/{desc['run_id']}/history", headers=CONTROL,
                          timeout=5).json()["events"]
    return [e["event_type"] for e in events]


def _wait_for_event(url: str, workflow_id: str, event_type: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while event_type not in _event_types(url, workflow_id):
        if time.monotonic() > deadline:
            raise AssertionError(f"{event_type} never recorded: {_event_types(url, workflow_id)}")
        time.sleep(0.05)


def test_killed_server_restarts_and_completes_the_run(server_process: _ServerProcess) -> None:
    url = server_process.url

    async def scenario() -> Any:
        client = Client(url)
        await client.start_workflow(workflow_type="restart.timer_then_activity", task_queue="q-restart",
                                    workflow_id="restart-1", input=["durable"])
        # phase 1: only workflow code runs; kill the server while the timer is pending
        workflows_only = Worker(client, task_queue="q-restart", workflows=[TimerThenActivity], poll_timeout=1.0)
        runner = asyncio.create_task(workflows_only.run())
        await asyncio.to_thread(_wait_for_event, url, "restart-1", "TimerScheduled")
        server_process.kill()
        server_process.start()
        # phase 2: the timer fires after the restart; kill again while the activity is pending
        await asyncio.to_thread(_wait_for_event, url, "restart-1", "ActivityScheduled")
        server_process.kill()
        server_process.start()
        await workflows_only.stop()
        await asyncio.wait_for(runner, 20)
        # phase 3: a worker with the activity finishes the same run
        full = Worker(client, task_queue="q-restart", workflows=[TimerThenActivity], activities=[shout],
                      poll_timeout=1.0)
        runner = asyncio.create_task(full.run())
        try:
            return await client.get_result(client.get_workflow_handle("restart-1"), timeout=30)
        finally:
            await full.stop()
            await asyncio.wait_for(runner, 20)

    assert asyncio.run(scenario()) == {"loud": "DURABLE"}
    assert _event_types(url, "restart-1") == [
        "StartAccepted", "WorkflowStarted", "TimerScheduled", "TimerFired", "ActivityScheduled", "ActivityStarted",
        "ActivityCompleted", "WorkflowCompleted"]
    assert os.path.getsize(server_process.db) > 0
