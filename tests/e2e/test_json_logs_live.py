"""``--log-format json`` on real processes: ``sync-worker run`` and ``sync-worker dev`` print one JSON
object per line (the dev server's banner too), and a task's per-task lines carry its ids. What
task code logs, and text mode keeping Celery's wording: tests/unit/observability/test_json_logs.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List

import pytest

from sync_worker.client import Client

from ._worker_support import unique_queue, wait_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.gevent_incompatible(reason="drives real worker processes; the pool is theirs")


def _records(out: str) -> List[Dict[str, Any]]:
    lines = [line for line in out.splitlines() if line.strip()]
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not one JSON object per line: {line!r}\n{out}") from None
    return records


def test_run_prints_json_lines_with_the_task_ids(dev_server_session: Any) -> None:
    queue = unique_queue("jsonlog")
    env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL=dev_server_session.url,
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    env.pop("SYNC_WORKER_LOG_FORMAT", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "sync_worker.cli", "run", "tests.e2e._signal_app:make_worker", "-Q", queue,
         "--loglevel", "INFO", "--log-format", "json"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        with Client(dev_server_session.url) as client:
            handle = client.start_activity("signals.sleep", 0.1, task_queue=queue)
            assert wait_for(lambda: handle.result(timeout=20), timeout=40) == "slept 0.1"
        time.sleep(0.3)
        process.send_signal(signal.SIGTERM)
        out = process.communicate(timeout=60)[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, out
    records = _records(out)
    assert all({"ts", "level", "logger", "message"} <= set(r) for r in records)
    received = [r for r in records if r["message"].startswith("Task signals.sleep[") and "received" in r["message"]]
    succeeded = [r for r in records if r["message"].startswith("Task signals.sleep[") and "succeeded" in r["message"]]
    assert len(received) == 1 and len(succeeded) == 1, out
    for record in received + succeeded:
        assert record["task_kind"] == "activity" and record["activity_type"] == "signals.sleep"
        assert record["task_queue"] == queue and record["attempt"] == 1 and record["task_id"]
    assert len({r["task_id"] for r in received + succeeded}) == 1  # both lines name the same task


def test_devserver_prints_json_lines() -> None:
    env = dict(os.environ, SYNC_WORKER_LOG_FORMAT="json")
    process = subprocess.Popen([sys.executable, "-m", "sync_worker.cli", "devserver", "--port", "0"], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(60.0, process.kill)  # a server that never says it listens fails, not hangs
    watchdog.start()
    try:
        head = []
        assert process.stdout is not None
        for line in process.stdout:  # SIGTERM only once it listens (a loaded machine starts it slowly)
            head.append(line)
            if "listening on http" in line:
                break
        process.send_signal(signal.SIGTERM)
        # Read the rest through the same file object: communicate(timeout=...) reads the raw pipe, so
        # lines the iteration above had buffered but not yet returned (the CLI's banner, arriving in
        # one read with the app's own "listening" line on a loaded machine) would be lost.
        out = "".join(head) + process.stdout.read()
        process.wait(30)
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, out
    messages = [r["message"] for r in _records(out)]
    assert any(m.startswith("Durable Workflow dev server listening on http://127.0.0.1:") for m in messages), out
    assert "dev server stopping" in messages
