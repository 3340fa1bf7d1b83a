"""A Django project (settings from ``SYNC_WORKER``) served by real gunicorn and uWSGI with the embedded workers.

The factory is ``sync_worker_django.workers:build_workers``: it sets Django up, runs
autodiscovery and builds one worker per ``TASK_QUEUES`` entry, with the slot counts of the
settings (not the embedding's default). The server URL comes from the settings only.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from ._servers import (
    HERE,
    UWSGI_LISTENING,
    ServerProcess,
    alive,
    base_env,
    free_port,
    registrations,
    uwsgi_argv,
    uwsgi_binary,
    wait_for,
)

pytest.importorskip("gunicorn", reason="gunicorn is a dev dependency (pip install -e '.[dev]')")
pytest.importorskip("django", reason="Django is a dev dependency (pip install -e '.[dev]')")

pytestmark = [pytest.mark.slow]


@pytest.mark.parametrize("worker_class", ["gthread", "gevent", "uwsgi"])
def test_django_project_runs_embedded_workers_from_its_settings(worker_class: str, devserver: Any, client: Any,
                                                                 queue: str, markers: Path, tmp_path: Path) -> None:
    env = base_env(devserver.url, queue, markers, SYNC_WORKER_FACTORY="sync_worker_django.workers:build_workers",
                   DJANGO_SETTINGS_MODULE="embedsite.settings", EMBED_DJANGO_SERVER_URL=devserver.url)
    del env["DURABLE_WORKFLOW_SERVER_URL"]  # the server comes from SYNC_WORKER["SERVER_URL"]
    env["PYTHONPATH"] = f"{HERE / 'django_site'}:{env['PYTHONPATH']}"
    if worker_class == "uwsgi":
        binary = uwsgi_binary()
        if binary is None:
            pytest.skip("uWSGI is a dev dependency (pip install -e '.[dev]')")
        argv = uwsgi_argv(binary, free_port())
        argv[argv.index("tests.integrations.embed.uwsgi_app")] = "embedsite.uwsgi_wsgi"
        server = ServerProcess(argv, env, tmp_path / "uwsgi-django.log", listening=UWSGI_LISTENING)
    else:
        argv = [sys.executable, "-m", "gunicorn", "-c", str(HERE / "gunicorn_conf.py"), "-k", worker_class, "-w",
                "2", "embedsite.wsgi:application"]
        server = ServerProcess(argv, env, tmp_path / "gunicorn-django.log")
    with server:
        def both_queues() -> Any:
            rows = [w for q in (queue, f"{queue}-mail") for w in registrations(client, q) if w["status"] == "active"]
            return rows if len(rows) == 4 else None

        try:
            rows = wait_for(both_queues, 60, "two workers (one per TASK_QUEUES entry) in each of 2 web workers")
        except AssertionError:
            raise AssertionError(server.log()[-5000:]) from None
        pids = {int(w["process_metrics"]["process_id"]) for w in rows}
        assert pids == {p for p in server.web_workers() if alive(p)} and server.pid not in pids
        slots = {w["task_queue"]: w["max_concurrent_activity_tasks"] for w in rows}
        assert slots == {queue: 3, f"{queue}-mail": 2}  # SYNC_WORKER's CONCURRENCY, per queue
        assert all(w["supported_activity_types"] == ["embedjango.work"] for w in rows)  # autodiscovered

        status, body = server.get("/")
        assert status == 200 and body.startswith(b"hello from django")
        results = [client.start_workflow("embedjango.flow", 0.2, task_queue=q).result(timeout=30)
                   for q in (queue, f"{queue}-mail")]
        assert {r["pid"] for r in results} <= pids
        for path in ("/readyz", "/durable/readyz"):  # the middleware and the Django view agree
            status, body = server.get(path)
            assert status == 200, (path, body)
            assert {w["task_queue"] for w in json.loads(body)["workers"]} == {queue, f"{queue}-mail"}

        server.signal(signal.SIGTERM)
        assert server.wait(30) == 0
        left = [(w["worker_id"], w["status"], (w.get("process_metrics") or {}).get("process_id"))
                for q in (queue, f"{queue}-mail") for w in registrations(client, q)]
        assert {status for _, status, _ in left} == {"deregistered"}, (left, server.log()[-5000:])
