"""``sync-worker devserver`` starts, logs its URL, serves, and stops cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import pytest
import requests


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_cli_serves_until_signalled(stop_signal: int) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "from sync_worker.cli import main; main()", "devserver", "--port", "0",
         "--namespace", "default", "--namespace", "Team-A", "--token", "t0k"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        url = None
        deadline = time.monotonic() + 15
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            found = re.search(r"listening on (http://\S+)", line)
            url = found.group(1) if found else None
        assert url is not None, "the dev server never logged its URL"
        headers = {"Authorization": "Bearer t0k", "X-Durable-Workflow-Control-Plane-Version": "2",
                   "X-Namespace": "team-a"}
        assert requests.get(f"{url}/api/workflows", headers=headers, timeout=5).status_code == 200
        assert requests.get(f"{url}/api/workflows", headers={**headers, "Authorization": "Bearer no"},
                            timeout=5).status_code == 401
        proc.send_signal(stop_signal)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
