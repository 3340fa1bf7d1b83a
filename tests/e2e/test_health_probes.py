"""Health probes (sync_worker.health) of real workers on the dev server, over real sockets."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Tuple

from sync_worker import Client, health
from sync_worker.devserver import DevServer

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for


def _get(url: str) -> Tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_probes_follow_the_running_worker(dev_server: DevServer) -> None:
    client = Client(dev_server.url)
    queue = unique_queue("health")
    worker = make_worker(client, task_queue=queue, activities=[])
    server = health.HealthServer(0).start()
    try:
        assert _get(f"http://127.0.0.1:{server.port}/readyz")[0] == 503  # nothing running yet
        with RunningWorker(worker) as running:
            wait_for(lambda: worker.status().ready, timeout=15)
            code, body = _get(f"http://127.0.0.1:{server.port}/readyz")
            assert code == 200 and body["status"] == "ok"
            assert [w["task_queue"] for w in body["workers"]] == [queue]
            assert body["workers"][0]["state"] == "running"
            assert _get(f"http://127.0.0.1:{server.port}/healthz/")[0] == 200
            assert running.stop() is None
        code, body = _get(f"http://127.0.0.1:{server.port}/readyz")
        assert code == 503 and "no worker" in body["reason"]
        assert _get(f"http://127.0.0.1:{server.port}/other")[0] == 404
    finally:
        server.stop()


def test_probe_names_the_failing_worker(dev_server: DevServer) -> None:
    client = Client(dev_server.url)
    worker = make_worker(client, task_queue=unique_queue("health"), activities=[])
    code, body = health.probe("ready", [worker])  # constructed, never run: not ready
    assert code == 503 and worker.worker_id in body["reason"]
    try:
        health.probe("sideways")
    except ValueError as error:
        assert "live" in str(error)
    else:
        raise AssertionError("an unknown probe kind must be refused")
