"""``sync-worker celery -A proj worker ...`` as a real process: threads and gevent, signals,
and a chord whose worker is SIGKILLed mid-way completing on a second worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

from sync_worker import Client
from sync_worker.devserver import DevServer

from ._support import SAMPLE, wait_for

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def server() -> Iterator[DevServer]:
    with DevServer(port=0, db=":memory:", workflow_task_lease_seconds=30, query_timeout_seconds=10) as dev:
        yield dev


@pytest.fixture
def app(server: DevServer) -> Iterator[object]:
    import proj.tasks  # noqa: F401
    from proj.celery import app as sample

    sample.client = Client(server.url)
    sample.conf.durable_workflow_heartbeat_interval = 0.5   # as the worker processes (env below)
    yield sample
    sample.client = None


class WorkerProcess:
    def __init__(self, server: Optional[DevServer], *args: str, log: Path) -> None:
        env = dict(os.environ, PROJ_SIGNAL_LOG=str(log.with_suffix(".signals")))
        paths = [str(SAMPLE), str(ROOT), str(ROOT / "integrations" / "celery"), str(ROOT / "integrations" / "django")]
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
        env.pop("DURABLE_WORKFLOW_SERVER_URL", None)
        if server is not None:
            env["DURABLE_WORKFLOW_SERVER_URL"] = server.url
        env["DURABLE_WORKFLOW_HEARTBEAT_INTERVAL"] = "0.5"
        env.pop("SYNC_WORKER_POOL", None)
        self.log = log
        self.handle = open(log, "wb")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen([sys.executable, "-m", "sync_worker", "celery", "-A", "proj", "worker", *args],
                                     cwd=str(SAMPLE), env=env, stdout=self.handle, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_running(self, workers: int = 1) -> None:
        wait_for(lambda: self.text().count("running on task queue") >= workers or self.proc.poll() is not None,
                 timeout=60)
        assert self.proc.poll() is None, self.text()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 40) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        self.handle.close()
        return code


@pytest.fixture
def spawn(server: DevServer, tmp_path: Path) -> Iterator[object]:
    started: List[WorkerProcess] = []

    def start(*args: str) -> WorkerProcess:
        worker = WorkerProcess(server, *args, log=tmp_path / f"worker-{len(started)}.log")
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop(signal.SIGKILL, timeout=10)


def test_worker_command_serves_tasks_and_drains_on_sigterm(app, spawn) -> None:
    from proj.tasks import add, greet, route_me

    worker = spawn("-Q", "proj-default,proj-routed", "-c", "4", "-l", "info", "-n", "cli-threads",
                   "--without-gossip", "--without-mingle", "-P", "solo", "-B")
    worker.wait_running(2)
    assert add.delay(20, 22).get(timeout=30) == 42
    assert greet.delay("cli", greeting="hey").get(timeout=30) == "hey, cli!"
    assert route_me.delay("r").get(timeout=30) == "r"
    assert worker.stop(signal.SIGTERM) == 0
    text = worker.text()
    assert "--without-gossip is accepted and ignored" in text
    assert "-P solo runs on threads" in text
    assert "pool threads" in text and "deregistered" in text
    # the core runtime's per-task lines, in Celery's wording
    assert "Task proj.tasks.add[" in text and "] received" in text and "succeeded in" in text and ": 42" in text
    assert "beat: server schedule celery-beat-add-every-second installed" in text
    assert app.client.describe_schedule("celery-beat-nightly-greeting").spec["cron_expressions"] == ["30 2 * * *"]


def test_prefork_pool_runs_tasks_in_child_processes_and_recycles_them(app, spawn) -> None:
    from proj.tasks import add

    worker = spawn("-Q", "proj-default", "-c", "2", "-l", "info", "-P", "prefork", "--max-tasks-per-child", "2")
    worker.wait_running(3)  # two task children and the canvas (workflow) child
    results = [add.delay(index, 1) for index in range(6)]
    assert [r.get(timeout=30) for r in results] == [index + 1 for index in range(6)]
    wait_for(lambda: worker.text().count("recycled (max-tasks-per-child reached (2 task(s)))") >= 2, timeout=20)
    assert worker.stop(signal.SIGTERM) == 0
    text = worker.text()
    assert "prefork pool of 2 process(es)" in text
    assert "prefork child a0.1 started" in text or "prefork child a1.1 started" in text
    assert "runs on threads" not in text
    rows = app.client.list_workers(task_queue="proj-default").workers
    assert {w.status for w in rows} == {"deregistered"}
    assert {w.max_concurrent_activity_tasks for w in rows if w.supported_activity_types} == {1}
    # Celery's prefork signals: worker_init / worker_shutdown once in the parent, the process ones
    # in every child that started its workers: the two task children, the canvas child and at
    # least one replacement (6 tasks, at most 2 per child); a replacement still starting when the
    # SIGTERM came leaves before it sends any
    fired = [line.split() for line in worker.log.with_suffix(".signals").read_text().splitlines()]
    parent = str(worker.proc.pid)
    assert [name for name, pid in fired if pid == parent] == ["worker_init", "worker_shutdown"], fired
    children = [pid for name, pid in fired if name == "worker_process_init"]
    assert parent not in children and len(set(children)) == len(children) >= 4, fired
    assert sorted(pid for name, pid in fired if name == "worker_process_shutdown") == sorted(children), fired


def test_gevent_pool_patches_first_and_raises_the_soft_limit(app, spawn) -> None:
    pytest.importorskip("gevent")
    from proj.tasks import add, soft_limited

    worker = spawn("-Q", "proj-default", "-c", "50", "-P", "gevent", "-l", "info")
    worker.wait_running()
    assert soft_limited.delay(5).get(timeout=30) == "cleaned up after the soft limit"
    assert add.delay(1, 2).get(timeout=30) == 3
    assert worker.stop(signal.SIGTERM) == 0
    assert "pool gevent" in worker.text()


def test_usage_errors_name_the_flag(server: DevServer, tmp_path: Path) -> None:
    for args, message in ((["-D"], "-D/--detach is not supported"), (["-P", "eventlet"], "-P eventlet"),
                          (["-X", "a"], "-X/--exclude-queues")):
        worker = WorkerProcess(server, *args, log=tmp_path / "usage.log")
        assert worker.proc.wait(60) == 2
        worker.handle.close()
        assert message in worker.text()


def test_chord_survives_its_worker_being_killed(app, spawn) -> None:
    from proj.tasks import sleepy, tsum
    from sync_worker_celery import chord

    first = spawn("-Q", "proj-default", "-c", "8", "-l", "info", "-n", "doomed")
    first.wait_running()
    result = chord([sleepy.s(3), sleepy.s(3), sleepy.s(3), sleepy.s(3)])(tsum.s())
    client = app.client

    def members_started() -> bool:
        runs = client.describe_workflow(result.id)
        history = client.get_history(result.id, runs.run_id)
        events = history.get("events", []) if isinstance(history, dict) else history
        return sum(1 for e in events if e.get("event_type") == "ActivityStarted") >= 4

    wait_for(members_started, timeout=30)
    time.sleep(0.5)
    first.proc.send_signal(signal.SIGKILL)
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    assert not result.ready()
    second = spawn("-Q", "proj-default", "-c", "8", "-l", "info", "-n", "rescuer")
    second.wait_running()
    assert result.get(timeout=90) == 12
    history = client.get_history(result.id, client.describe_workflow(result.id).run_id)
    events = history.get("events", []) if isinstance(history, dict) else history
    retried = [e for e in events if e.get("event_type") == "ActivityRetryScheduled"]
    assert len(retried) >= 4 and all(e["payload"].get("timeout_kind") == "heartbeat" for e in retried)
    assert second.stop(signal.SIGTERM) == 0


def test_beat_command_installs_the_schedules_and_exits(app, server: DevServer, tmp_path: Path) -> None:
    env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL=server.url, PYTHONPATH=os.pathsep.join(
        [str(SAMPLE), str(ROOT), str(ROOT / "integrations" / "celery"), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "sync_worker", "celery", "-A", "proj", "beat"], cwd=str(SAMPLE),
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "installed 2 schedule(s): celery-beat-add-every-second, celery-beat-nightly-greeting" in done.stdout
    assert app.client.describe_schedule("celery-beat-add-every-second").spec["intervals"] == [{"every": "PT1S"}]


def test_without_a_server_url_the_worker_uses_the_local_default_as_every_command(tmp_path: Path) -> None:
    """Issue 27: ``sync-worker celery`` no longer refuses to start without a server URL; like the
    operator commands and ``sync-worker run`` it uses http://127.0.0.1:7233 and says so."""
    with DevServer(port=7233, db=":memory:") as local:  # fails loudly if something else holds 7233
        worker = WorkerProcess(None, "-Q", "proj-default", "-l", "info", log=tmp_path / "default.log")
        worker.wait_running()
        assert worker.stop(signal.SIGTERM) == 0
        text = worker.text()
        assert "no server URL given (--server-url or DURABLE_WORKFLOW_SERVER_URL): using http://127.0.0.1:7233" in text
        assert "ready: queues proj-default (server http://127.0.0.1:7233)" in text, text
        assert Client(local.url).list_workers(task_queue="proj-default")["workers"]


def test_app_start_from_a_script_serves_like_the_command(server: DevServer, tmp_path: Path) -> None:
    """Issue 27: ``python myapp.py worker -l INFO`` (Celery's ``app.start()``, which reads
    :data:`sys.argv`) runs with the given flags and prints the same ready line as ``sync-worker celery``."""
    script = tmp_path / "myapp.py"
    script.write_text("from proj.celery import app\nimport proj.tasks  # noqa: F401\n\n"
                      "if __name__ == '__main__':\n    app.start()\n")
    env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL=server.url)
    paths = [str(SAMPLE), str(ROOT), str(ROOT / "integrations" / "celery"), str(ROOT / "integrations" / "django")]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    env.pop("SYNC_WORKER_POOL", None)
    log = tmp_path / "start.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(script), "worker", "-l", "INFO", "-Q", "proj-default"],
                                cwd=str(tmp_path), env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: "running on task queue" in log.read_text() or proc.poll() is not None, timeout=60)
            assert proc.poll() is None, log.read_text()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(40) == 0, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
    text = log.read_text()
    assert f"ready: queues proj-default (server {server.url})" in text, text


def test_worker_main_needs_the_worker_sub_command() -> None:
    from sync_worker_celery import Celery

    app = Celery("needs-worker", set_as_current=False)
    with pytest.raises(ValueError, match="The worker sub-command must be specified in argv"):
        app.worker_main(["beat"])
