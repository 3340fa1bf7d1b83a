"""examples/django_shop runs as its README says: migrate, dev server, worker, place_order, SIGTERM.

Every step is a real ``manage.py`` process; the worker is stopped by a real SIGTERM from this
process and must exit 0 (warm shutdown, deregistered).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Dict, List

import pytest

from tests._affinity import LINUX_AFFINITY, distinct_affinities
from tests._sdk_missing import DJANGO_TASKS_MISSING, DJANGO_TASKS_UNAVAILABLE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "django_shop")

if DJANGO_TASKS_UNAVAILABLE:
    pytest.skip(DJANGO_TASKS_MISSING, allow_module_level=True)
pytest.importorskip("django", reason="Django is not installed: pip install -e '.[dev]' installs it")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            json.loads(response.read())
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def _wait(predicate: object, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_example_shop_end_to_end(tmp_path: os.PathLike[str]) -> None:
    server_port, health_port = _free_port(), _free_port()
    env: Dict[str, str] = dict(os.environ)
    env.update({
        "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "integrations", "django"),
                                       env.get("PYTHONPATH", "")]),
        "SHOP_DB_NAME": os.path.join(str(tmp_path), "shop.sqlite3"),
        "DURABLE_WORKFLOW_SERVER_URL": f"http://127.0.0.1:{server_port}",
        "PYTHONUNBUFFERED": "1",
    })
    env.pop("SYNC_WORKER_POOL", None)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=EXAMPLE, env=env, check=True, timeout=120)
    procs: List[subprocess.Popen[str]] = []
    try:
        devserver = subprocess.Popen([*manage, "durable_devserver", "--port", str(server_port)], cwd=EXAMPLE,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(devserver)
        _wait(lambda: _get(f"http://127.0.0.1:{server_port}/api/cluster/info") == 200, "the dev server")
        if LINUX_AFFINITY and len(os.sched_getaffinity(0)) > 1:  # pinned to one core, as sync-worker devserver
            pinned = distinct_affinities(devserver.pid)
            assert len(pinned) == 1 and len(next(iter(pinned))) == 1, pinned
        worker = subprocess.Popen([*manage, "durable_worker", "--health-port", str(health_port), "-l", "warning"],
                                  cwd=EXAMPLE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(worker)
        _wait(lambda: _get(f"http://127.0.0.1:{health_port}/readyz") == 200, "the worker's readiness")
        placed = subprocess.run([*manage, "place_order", "ada", "2"], cwd=EXAMPLE, env=env, capture_output=True,
                                text=True, timeout=120)
        assert placed.returncode == 0, placed.stdout + placed.stderr
        assert "'receipt': 'order 1: 39.98 charged and shipped'" in placed.stdout, placed.stdout
        assert "SUCCESSFUL: mailed 'ada': order 1: 39.98 charged and shipped" in placed.stdout, placed.stdout
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0, worker.stdout.read() if worker.stdout else ""
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)


def test_durable_devserver_refuses_a_bad_cpu_value() -> None:
    env: Dict[str, str] = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, os.path.join(ROOT, "integrations", "django"), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "manage.py", "durable_devserver", "--port", "0", "--cpu", "most"],
                         cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "--cpu takes auto, none or a core number" in out.stderr, out.stderr
