"""The Django-flavoured sample: config_from_object("django.conf:settings", namespace="CELERY"),
autodiscover_tasks() over INSTALLED_APPS, @shared_task in a reusable app; worker and web side
as two real processes on the dev server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator

import pytest

from sync_worker.devserver import DevServer

from ._support import HERE, wait_for

pytest.importorskip("django")

ROOT = Path(__file__).resolve().parents[3]
DJSAMPLE = HERE / "djsample"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Dict[str, str]]:
    with DevServer(port=0, db=":memory:") as server:
        environ = dict(os.environ)
        paths = [str(DJSAMPLE), str(ROOT), str(ROOT / "integrations" / "celery"),
                 str(ROOT / "integrations" / "django")]
        environ["PYTHONPATH"] = os.pathsep.join([*paths, environ.get("PYTHONPATH", "")])
        environ["DJANGO_SETTINGS_MODULE"] = "djproj.settings"
        environ["DURABLE_WORKFLOW_SERVER_URL"] = server.url
        environ["CELERY_DJSAMPLE_DB"] = str(tmp_path / "shop.sqlite3")
        environ.pop("SYNC_WORKER_POOL", None)
        yield environ


def test_django_project_worker_and_web_processes(env: Dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    with open(log, "wb") as handle:
        worker = subprocess.Popen(
            [sys.executable, "-m", "sync_worker", "celery", "-A", "djproj", "worker", "-Q", "dj-default,dj-names",
             "-l", "info"], cwd=str(DJSAMPLE), env=env, stdout=handle, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: log.read_text().count("running on task queue") >= 2 or worker.poll() is not None,
                     timeout=60)
            assert worker.poll() is None, log.read_text()
            # autodiscovery found shop.tasks through INSTALLED_APPS (it imports its models at the top:
            # django.setup() ran first): debug_task, shop_name, order_total, place_order
            assert "1 workflow, 4 activity types" in log.read_text()
            web = subprocess.run([sys.executable, str(DJSAMPLE / "client_script.py")], cwd=str(DJSAMPLE), env=env,
                                 capture_output=True, text=True, timeout=120)
            assert web.returncode == 0, web.stderr
            out = json.loads(web.stdout.strip().splitlines()[-1])
            assert out == {"total": 55, "name": "the sample shop", "state": "SUCCESS", "queue": "dj-names",
                           "default_queue": "dj-default", "order_saved": True, "on_commit_order": True}
        finally:
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(40)
    assert code == 0, log.read_text()
