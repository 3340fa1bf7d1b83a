"""``sync-worker run`` start-up as real processes (issue 9): it waits for a server that is not up
yet (``--max-startup-wait``), names the URL and the cause when it gives up (connection refused,
HTTP 401 "check the token"), and prints where it connects at start-up."""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import List

import pytest
import requests

from sync_worker.client import Client
from sync_worker.devserver import DevServer

from ._worker_support import unique_queue, wait_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(url: str, queue: str, *extra: str, token: str = "") -> subprocess.Popen[str]:
    env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL=url,
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    env.pop("DURABLE_WORKFLOW_AUTH_TOKEN", None)
    if token:
        env["DURABLE_WORKFLOW_AUTH_TOKEN"] = token
    return subprocess.Popen(
        [sys.executable, "-m", "sync_worker.cli", "run", "tests.e2e._signal_app:make_worker", "-Q", queue,
         "--loglevel", "INFO", *extra],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(process: subprocess.Popen[str], timeout: float = 30) -> tuple[int, str]:
    try:
        out = process.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        process.kill()
        out = process.communicate()[0]
        raise AssertionError(f"worker did not exit within {timeout}s:\n{out}")
    return process.returncode, out


def test_gives_up_after_max_startup_wait_naming_url_and_cause() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    started = time.monotonic()
    code, out = _finish(_start(url, unique_queue("startup"), "--max-startup-wait", "3"))
    elapsed = time.monotonic() - started
    assert code == 1, out
    assert 2.0 <= elapsed < 20, elapsed  # it waited, instead of exiting at once
    assert f"unable to read {url}/api/cluster/info" in out, out
    assert "connection refused" in out and "gave up after" in out, out
    assert "cannot start yet: connection refused" in out, out  # logged while retrying
    assert "TransportError" not in out.splitlines()[-1]


def test_a_wrong_token_says_check_the_token() -> None:
    with DevServer(token="right") as server:
        url = server.url
        code, out = _finish(_start(url, unique_queue("token"), "--max-startup-wait", "0", token="wrong"))
    assert code == 1, out
    assert "HTTP 401" in out and "check the token" in out, out
    last = out.strip().splitlines()[-1]
    assert f"Credentials error: the server at {url} refused the worker's credentials" in last, out
    assert "compatibility" not in last, out


class _OtherApp(http.server.BaseHTTPRequestHandler):
    """Some other web application: 404 for /api/cluster/info, or JSON that is not cluster info."""

    def do_GET(self) -> None:
        json_api = self.server.json_api  # type: ignore[attr-defined]
        body = b'{"items": []}' if json_api else b"<html><body>Not Found</body></html>"
        self.send_response(200 if json_api else 404)
        self.send_header("Content-Type", "application/json" if json_api else "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("json_api", [False, True], ids=["404", "other-json-api"])
def test_a_url_of_another_http_server_is_named_as_not_a_durable_workflow_server(json_api: bool) -> None:
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OtherApp)
    other.json_api = json_api  # type: ignore[attr-defined]
    threading.Thread(target=other.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{other.server_address[1]}"
    try:
        started = time.monotonic()
        code, out = _finish(_start(url, unique_queue("other"), "--max-startup-wait", "60"))
    finally:
        other.shutdown()
        other.server_close()
    assert code == 1, out
    assert time.monotonic() - started < 20  # not retried for the whole start-up wait
    last = out.strip().splitlines()[-1]
    answered = "a body that is not its cluster-info JSON" if json_api else "HTTP 404"
    assert f"Not a Durable Workflow server: {url}/api/cluster/info answered {answered}" in last, out
    assert "NotFound: server returned 404" not in out, out


def test_waits_for_a_server_that_comes_up_later_and_prints_where_it_connects() -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    queue = unique_queue("later")
    health = _free_port()
    process = _start(url, queue, "--max-startup-wait", "60", "--health-port", str(health))
    servers: List[DevServer] = []

    def readyz() -> int:
        try:
            return requests.get(f"http://127.0.0.1:{health}/readyz", timeout=2).status_code
        except requests.ConnectionError:
            return 0

    try:
        time.sleep(3.0)  # the worker starts first and keeps trying
        assert process.poll() is None, process.communicate()[0]
        assert readyz() == 503  # alive, not ready: no server yet
        servers.append(DevServer(port=port).start())
        client = Client(url)
        wait_for(lambda: client.list_workers(task_queue=queue)["workers"], timeout=40, interval=0.2)
        wait_for(lambda: readyz() == 200, timeout=10)
        process.send_signal(signal.SIGTERM)
        code, out = _finish(process)
    finally:
        if process.poll() is None:
            process.kill()
        for server in servers:
            server.stop()
    assert code == 0, out
    assert f"server {url}, namespace 'default', task queue '{queue}', pool threads" in out, out
    assert "cannot start yet: connection refused" in out, out


@pytest.mark.parametrize("argv", [
    ["run", "tests.e2e._signal_app:make_worker", "--server-url", "http://127.0.0.1:7233/api"],
    ["workflow", "list", "--server-url", "http://127.0.0.1:7233/api"],
], ids=["run", "operator"])
def test_a_server_url_ending_in_api_is_a_one_line_usage_error(argv: List[str]) -> None:
    """Issue 27: was a 35-line traceback ending in a correct ValueError."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "sync_worker.cli", *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "leave out the trailing /api" in errors[0], done.stderr
