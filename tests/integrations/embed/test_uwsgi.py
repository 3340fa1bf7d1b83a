"""Real uWSGI masters (the PyPI build of the dev extra) with embedded workers on the dev server.

Preforking (app loaded in the master, workers started by the postfork hook), lazy-apps (app
loaded in each worker) and web workers of several request threads; graceful reload, shutdown,
``kill -9``, ``max-requests`` recycling, a mule running the workers instead of the web workers
(also beside uWSGI's gevent loop engine, which refuses workers in its web workers), and the clear
error of a uWSGI that runs Python without threads (Debian's 2.0.21 package, prepared by
``scripts/prepare.d/45-debian-uwsgi.sh``).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List

import pytest

from ._servers import (
    ROOT,
    UWSGI_LISTENING,
    ServerProcess,
    active_pids,
    alive,
    base_env,
    free_port,
    marker,
    registrations,
    uwsgi_argv,
    uwsgi_binary,
    wait_for,
)
from .test_gunicorn import _finish_with_local_worker

UWSGI = uwsgi_binary()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(UWSGI is None, reason="uWSGI is a dev dependency (pip install -e '.[dev]')")]

FACTORY = "tests.integrations.embed.worker_app:build"


def _server(devserver: Any, queue: str, markers: Path, tmp_path: Path, *extra: str, **env: str) -> ServerProcess:
    assert UWSGI is not None
    env.setdefault("SYNC_WORKER_FACTORY", FACTORY)
    return ServerProcess(uwsgi_argv(UWSGI, free_port(), *extra), base_env(devserver.url, queue, markers, **env),
                         tmp_path / "uwsgi.log", listening=UWSGI_LISTENING)


def _web_workers(server: ServerProcess) -> List[int]:
    """Live web worker pids, from uWSGI's own "spawned uWSGI worker" lines."""
    pids = [int(p) for p in re.findall(r"[Ss]pawned uWSGI worker \d+ \((?:new )?pid: (\d+)", server.log())]
    return sorted(p for p in pids if alive(p))


def _two_registered(client: Any, queue: str, server: ServerProcess) -> List[int]:
    def ready() -> Any:
        pids = active_pids(client, queue)
        return pids if len(pids) == 2 and pids == _web_workers(server) else None

    try:
        return list(wait_for(ready, 60, "two registrations, one from each web worker"))
    except AssertionError:
        raise AssertionError(f"{registrations(client, queue)}\n{server.log()[-5000:]}") from None


#: uWSGI options of each mode: the app loaded in the master (preforking) or in each web worker
#: (lazy-apps), and web workers of 4 request threads each (threads).
MODES = {"preforking": [], "lazy-apps": ["--lazy-apps"], "threads": ["--threads", "4"]}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_serves_http_runs_workflows_and_drains_on_shutdown(mode: str, devserver: Any, client: Any, queue: str,
                                                          markers: Path, tmp_path: Path) -> None:
    extra = MODES[mode]
    with _server(devserver, queue, markers, tmp_path, *extra) as server:
        pids = _two_registered(client, queue, server)
        assert server.pid not in pids
        assert ("Operational MODE: preforking+threaded" in server.log()) == (mode == "threads"), server.log()[-3000:]
        handles = [client.start_workflow("embed.flow", f"u{i}", 0.3, task_queue=queue) for i in range(6)]
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda _: server.get("/"), range(30)))
        assert all(status == 200 and body.startswith(b"hello from ") for status, body in answers)
        results = [h.result(timeout=30) for h in handles]
        assert {r["attempt"] for r in results} == {1} and {r["pid"] for r in results} <= set(pids)
        status, body = server.get("/readyz")
        assert status == 200 and json.loads(body)["workers"][0]["task_queue"] == queue

        slow = client.start_workflow("embed.flow", "term", 3.0, task_queue=queue)
        runner = wait_for(lambda: marker(markers, "term.1.start"), 20, "the activity started")
        signalled = time.monotonic()
        server.signal(signal.SIGTERM)  # --die-on-term: shut down
        code = server.wait(30)
        log = server.log()
        assert code == 0, log[-5000:]
        assert time.monotonic() - signalled < 15, log[-5000:]
        assert marker(markers, "term.1.done") == runner, log[-5000:]
        assert "drained and deregistered" in log
        assert {w["status"] for w in registrations(client, queue)} == {"deregistered"}
    assert _finish_with_local_worker(client, queue, slow.workflow_id) == {"pid": runner, "attempt": 1}


def test_graceful_reload_drains_old_workers_and_registers_new_ones(devserver: Any, client: Any, queue: str,
                                                                   markers: Path, tmp_path: Path) -> None:
    with _server(devserver, queue, markers, tmp_path) as server:
        old = _two_registered(client, queue, server)
        handle = client.start_workflow("embed.flow", "hup", 3.0, task_queue=queue)
        runner = wait_for(lambda: marker(markers, "hup.1.start"), 20, "the activity started")
        server.signal(signal.SIGHUP)
        new = wait_for(lambda: (lambda n: n if len(n) == 2 else None)(
            [p for p in active_pids(client, queue) if p not in old]), 40, "two new registrations")
        assert handle.result(timeout=30) == {"pid": runner, "attempt": 1}
        statuses = {int(w["process_metrics"]["process_id"]): w["status"] for w in registrations(client, queue)}
        assert all(statuses[p] == "deregistered" for p in old), statuses
        assert sorted(new) == _web_workers(server)
        assert client.start_workflow("embed.flow", "after", 0.2, task_queue=queue).result(timeout=30)["pid"] in new


# How the master passes each signal on with --die-on-term (uwsgi_argv): SIGINT and SIGTERM shut
# down (SIGINT to each web worker: exit at once), SIGQUIT reloads brutally (SIGTERM to each web
# worker: exit at once), SIGHUP reloads gracefully (SIGHUP: end the request in flight, then exit).
BUSY_STOPS = {"SIGINT": "stop", "SIGTERM": "stop", "SIGQUIT": "reload", "SIGHUP": "reload"}


@pytest.mark.parametrize("stop,mode", [*((s, "preforking") for s in sorted(BUSY_STOPS)),
                                       ("SIGINT", "lazy-apps"), ("SIGHUP", "lazy-apps")])
def test_web_workers_busy_with_a_request_still_drain_and_deregister(stop: str, mode: str, devserver: Any,
                                                                   client: Any, queue: str, markers: Path,
                                                                   tmp_path: Path) -> None:
    """The stop reaches both web workers in the middle of a slow request, one of them also running an
    activity. uWSGI's Python plugin runs no atexit hook in a worker busy with a request, so the drain
    and deregistration must not depend on one: the activity ends in the process that started it, every
    old registration is deregistered, and (for the stops that exit at once) the requests were still
    in flight when uWSGI's own handler ended the process."""
    signum = getattr(signal, stop)
    graceful = stop == "SIGHUP"
    extra = MODES[mode]
    with _server(devserver, queue, markers, tmp_path, *extra) as server:
        old = _two_registered(client, queue, server)
        handle = client.start_workflow("embed.flow", "busy", 3.0, task_queue=queue)
        runner = wait_for(lambda: marker(markers, "busy.1.start"), 20, "the activity started")
        seconds = 5 if graceful else 20  # a graceful reload lets the request end (within worker-reload-mercy 15)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            requests = [pool.submit(server.get, f"/?sleep={seconds}&mark=req", 40) for _ in old]
            wait_for(lambda: all(marker(markers, f"req.{p}") == p for p in old), 20,
                     "both web workers busy with a request")
            signalled = time.monotonic()
            server.signal(signum)
            if BUSY_STOPS[stop] == "stop":
                assert server.wait(30) == 0, server.log()[-5000:]
                assert time.monotonic() - signalled < 15, server.log()[-5000:]
            else:
                wait_for(lambda: (lambda n: len(n) == 2)([p for p in active_pids(client, queue) if p not in old]),
                         40, "two new registrations")
            answers = [f.exception() or f.result() for f in requests]
        log = server.log()
        if graceful:
            assert all(isinstance(a, tuple) for a in answers), answers  # the requests ended first
            assert sorted(answers) == [(200, f"hello from {p}\n".encode()) for p in old], answers
        else:  # uWSGI ended the processes in the middle of the requests, after the drain
            assert all(isinstance(a, BaseException) for a in answers), answers
        assert marker(markers, "busy.1.done") == runner, log[-5000:]
        for pid in old:
            assert f"pid {pid}: embedded workers drained and deregistered" in log, log[-5000:]
        statuses = {int(w["process_metrics"]["process_id"]): w["status"] for w in registrations(client, queue)}
        assert all(statuses[p] == "deregistered" for p in old), statuses
        if BUSY_STOPS[stop] == "reload":
            assert handle.result(timeout=30) == {"pid": runner, "attempt": 1}
    if BUSY_STOPS[stop] == "stop":
        assert _finish_with_local_worker(client, queue, handle.workflow_id) == {"pid": runner, "attempt": 1}


def test_kill_9_of_a_web_worker_mid_activity_is_retried_and_completes(devserver: Any, client: Any, queue: str,
                                                                      markers: Path, tmp_path: Path) -> None:
    with _server(devserver, queue, markers, tmp_path) as server:
        _two_registered(client, queue, server)
        handle = client.start_workflow("embed.flow", "kill", 2.0, task_queue=queue)
        victim = wait_for(lambda: marker(markers, "kill.1.start"), 20, "the activity started")
        os.kill(victim, signal.SIGKILL)
        result = handle.result(timeout=60)
        assert result["attempt"] >= 2 and result["pid"] != victim, result
        assert marker(markers, "kill.1.done") is None
        wait_for(lambda: len(_web_workers(server)) == 2, 30, "uWSGI respawned the killed worker")


def test_max_requests_recycling_loses_no_run_and_leaves_no_duplicate_registration(
        devserver: Any, client: Any, queue: str, markers: Path, tmp_path: Path) -> None:
    recycles_wanted = 20
    with _server(devserver, queue, markers, tmp_path, "--max-requests", "50", "--min-worker-lifetime", "1") as server:
        _two_registered(client, queue, server)
        handles = []
        deadline = time.monotonic() + 240

        def spawned() -> int:
            return len(re.findall(r"[Ss]pawned uWSGI worker", server.log()))

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            while spawned() - 2 < recycles_wanted:
                assert time.monotonic() < deadline, f"only {spawned() - 2} recycles\n{server.log()[-4000:]}"
                handles.append(client.start_workflow("embed.flow", f"mr{len(handles)}", 0.3, task_queue=queue))
                assert all(status == 200 for status, _ in pool.map(lambda _: server.get("/", timeout=30), range(20)))
        assert all(h.result(timeout=60)["attempt"] >= 1 for h in handles)
        wait_for(lambda: active_pids(client, queue) == _web_workers(server) and len(_web_workers(server)) == 2, 60,
                 "exactly one active registration per live web worker")
        rows = registrations(client, queue)
        pids = [int(w["process_metrics"]["process_id"]) for w in rows]
        assert len(pids) == len(set(pids)) and len(rows) >= recycles_wanted + 2
        assert {w["status"] for w in rows} <= {"active", "deregistered"}


#: uWSGI's gevent loop engine in the web workers (the mule runs the embedded workers either way).
GEVENT_ENGINE = ["--gevent", "20", "--gevent-monkey-patch"]


@pytest.mark.parametrize("engine", ["default", "gevent"])
def test_a_mule_runs_the_workers_instead_of_the_web_workers(engine: str, devserver: Any, client: Any, queue: str,
                                                             markers: Path, tmp_path: Path) -> None:
    extra = GEVENT_ENGINE if engine == "gevent" else []
    with _server(devserver, queue, markers, tmp_path, "--mule=sync_worker.embed.uwsgi:mule", *extra,
                 SYNC_WORKER_UWSGI_MULE="1") as server:
        mule_pid = int(wait_for(lambda: re.search(r"spawned uWSGI mule 1 \(pid: (\d+)", server.log()), 20,
                                "the mule started").group(1))
        wait_for(lambda: active_pids(client, queue) == [mule_pid], 30, "the mule registered (and nothing else)")
        assert mule_pid not in _web_workers(server) and len(_web_workers(server)) == 2
        assert server.get("/")[0] == 200
        handle = client.start_workflow("embed.flow", "mule", 2.0, task_queue=queue)
        assert wait_for(lambda: marker(markers, "mule.1.start"), 20, "the activity started") == mule_pid
        server.signal(signal.SIGTERM)
        assert server.wait(30) == 0, server.log()[-4000:]
        assert marker(markers, "mule.1.done") == mule_pid  # drained before the mule exited
        assert {w["status"] for w in registrations(client, queue)} == {"deregistered"}
    assert _finish_with_local_worker(client, queue, handle.workflow_id) == {"pid": mule_pid, "attempt": 1}


def test_embedding_in_web_workers_on_the_gevent_loop_engine_is_a_clear_error(devserver: Any, client: Any,
                                                                            queue: str, markers: Path) -> None:
    assert UWSGI is not None
    argv = uwsgi_argv(UWSGI, free_port(), *GEVENT_ENGINE, processes=1)
    refused = subprocess.run(argv, env=base_env(devserver.url, queue, markers, SYNC_WORKER_FACTORY=FACTORY),
                             cwd=str(ROOT), capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0  # --need-app: the app was not loaded, uWSGI exits
    assert "gevent loop engine (--gevent) is not supported" in refused.stdout + refused.stderr
    assert "mule = sync_worker.embed.uwsgi:mule" in refused.stdout + refused.stderr
    assert registrations(client, queue) == []


DEBIAN_UWSGI = os.environ.get("SYNC_WORKER_TEST_DEBIAN_UWSGI")


def _debian_python_matches() -> bool:
    try:
        out = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        return False
    return out == "{}.{}".format(*sys.version_info[:2])


@pytest.mark.skipif(not DEBIAN_UWSGI, reason="Debian's uwsgi-plugin-python3 is installed by "
                    "scripts/prepare.d/45-debian-uwsgi.sh (root with apt-get); SYNC_WORKER_TEST_DEBIAN_UWSGI unset")
@pytest.mark.skipif(not _debian_python_matches(), reason="Debian's python3 plugin embeds another Python minor "
                    "version than this test's, so it cannot load this environment's packages")
def test_uwsgi_without_python_threads_is_a_clear_error(devserver: Any, client: Any, queue: str, markers: Path,
                                                       tmp_path: Path) -> None:
    assert DEBIAN_UWSGI is not None
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = base_env(devserver.url, queue, markers, SYNC_WORKER_FACTORY=FACTORY)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], *site])
    argv = uwsgi_argv(DEBIAN_UWSGI, free_port(), processes=1)
    refused = subprocess.run(argv, env=env, cwd=str(ROOT), capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0  # --need-app: the app was not loaded, uWSGI exits
    assert "without thread support" in refused.stdout + refused.stderr
    assert "--enable-threads" in refused.stdout + refused.stderr
    assert registrations(client, queue) == []
    # The same server with --enable-threads runs the embedded worker.
    env_ok = ServerProcess([*argv, "--enable-threads"], env, tmp_path / "debian-uwsgi.log", listening=UWSGI_LISTENING)
    with env_ok as server:
        wait_for(lambda: len(active_pids(client, queue)) == 1, 30, "the worker registered")
        assert client.start_workflow("embed.flow", "deb", 0.2, task_queue=queue).result(timeout=30)["attempt"] == 1
        server.signal(signal.SIGINT)
        server.wait(30)
