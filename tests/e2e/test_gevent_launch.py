"""Launching the gevent pool: patch-first entry points, refusal when unpatched, late-patch report.

Each case runs in its own interpreter (a subprocess), so it works the same from the unpatched
main suite and from the gevent suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker.client import Client
from sync_worker.worker.cli import EXIT_COLD_STOP, EXIT_OK, EXIT_USAGE

from ._worker_support import unique_queue, wait_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WATCHDOG_SECONDS = 30


def _env(**extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SYNC_WORKER_POOL", "SYNC_WORKER_TEST_POOL")}
    env["PYTHONPATH"] = REPO
    env.update(extra)
    return env


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=_env(**env),
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


def test_gevent_pool_in_an_unpatched_process_is_refused_with_the_fix() -> None:
    result = _python("""
        from sync_worker.worker import Worker
        from sync_worker.runtime.gevent_backend import GeventNotPatched
        try:
            Worker(object(), task_queue="q", pool="gevent")
        except GeventNotPatched as error:
            print("refused:", error)
        else:
            print("started")
        # SYNC_WORKER_POOL asks for gevent too, and is refused the same way
        try:
            Worker(object(), task_queue="q")
        except GeventNotPatched:
            print("env refused")
    """, SYNC_WORKER_POOL="gevent")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "refused:" in out and "started" not in out and "env refused" in out
    assert "sync-worker run -P gevent" in out and "monkey.patch_all()" in out


def test_run_command_refuses_gevent_when_the_entry_point_did_not_patch() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sync_worker.cli", "run", "tests.e2e._signal_app:make_worker", "-P", "gevent"],
        cwd=REPO, env=_env(DURABLE_WORKFLOW_SERVER_URL="http://127.0.0.1:9"),
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == EXIT_USAGE, result.stdout + result.stderr
    assert "monkey-patched" in result.stderr and "sync-worker run -P gevent" in result.stderr


def test_patching_late_names_the_modules_that_kept_blocking_originals(tmp_path: Path) -> None:
    (tmp_path / "early_app.py").write_text("from time import sleep\nfrom socket import create_connection\n")
    result = _python("""
        import early_app  # imported before the patch: keeps the blocking originals
        from gevent import monkey
        monkey.patch_all()
        import logging
        logging.basicConfig(level=logging.WARNING)
        from sync_worker.worker import Worker
        worker = Worker(object(), task_queue="q")
        print("pool", worker.backend.name)
    """, PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}")
    assert result.returncode == 0, result.stderr
    assert "pool gevent" in result.stdout  # the default follows the patched process
    assert "early_app.sleep (time.sleep)" in result.stderr
    assert "early_app.create_connection (socket.create_connection)" in result.stderr


def _launch(url: str, queue: str, args: List[str], **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "sync_worker", "run", "tests.e2e._signal_app:make_worker", "-Q", queue,
         "-l", "INFO", *args],
        cwd=REPO, env=_env(DURABLE_WORKFLOW_SERVER_URL=url, **env),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def _wait_exit(process: subprocess.Popen[str]) -> int:
    try:
        return process.wait(WATCHDOG_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError(f"worker did not exit within {WATCHDOG_SECONDS}s:\n{process.communicate()[0]}")


def test_python_m_sync_worker_with_p_gevent_runs_and_drains_on_sigterm(
        client: Client, dev_server_session: Any) -> None:
    queue = unique_queue("gevent-launch")
    process = _launch(dev_server_session.url, queue, ["-P", "gevent"])
    try:
        receipt = client.start_activity("signals.sleep", 1.0, task_queue=queue)
        wait_for(lambda: client.describe_activity(receipt["activity_id"]).get("last_heartbeat_at"), timeout=20)
        process.send_signal(signal.SIGTERM)
        code = _wait_exit(process)
        output = process.communicate()[0]
        assert code == EXIT_OK, output
        assert "(pool gevent;" in output
        assert "patched after these modules" not in output  # the launcher patched first
        assert client.get_activity_result(receipt["activity_id"], timeout=5) == "slept 1.0"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_env_selected_gevent_worker_is_cold_stopped_at_once_by_sigquit(
        client: Client, dev_server_session: Any) -> None:
    queue = unique_queue("gevent-launch")
    process = _launch(dev_server_session.url, queue, [], SYNC_WORKER_POOL="gevent")
    try:
        receipt = client.start_activity("signals.sleep", 60, task_queue=queue)
        wait_for(lambda: client.describe_activity(receipt["activity_id"]).get("last_heartbeat_at"), timeout=20)
        process.send_signal(signal.SIGQUIT)
        code = _wait_exit(process)
        output = process.communicate()[0]
        assert code == EXIT_COLD_STOP, output
        assert "(pool gevent;" in output
        assert "killed 1 task(s)" in output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
