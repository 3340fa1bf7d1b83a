"""Real gunicorn masters (sync, gthread, gevent worker classes) with embedded workers on the dev server.

Every test starts ``python -m gunicorn -c gunicorn_conf.py`` with 2 web workers, serves HTTP
and runs workflows whose activities execute inside the web worker processes; signals come
from this (another) process. Markers written by the activity say which pid ran which attempt.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import time
from pathlib import Path
from typing import Any, List

import pytest

from sync_worker.worker import Worker

from ._servers import (
    ServerProcess,
    active_pids,
    alive,
    base_env,
    gunicorn_argv,
    marker,
    registrations,
    thread_count,
    wait_for,
)
from .worker_app import Flow, work

pytest.importorskip("gunicorn", reason="gunicorn is a dev dependency (pip install -e '.[dev]')")

pytestmark = [pytest.mark.slow]

CLASSES = ["sync", "gthread", "gevent"]
FACTORY = "tests.integrations.embed.worker_app:build"


def _server(devserver: Any, queue: str, markers: Path, tmp_path: Path, worker_class: str, *extra: str,
            **env: str) -> ServerProcess:
    env.setdefault("SYNC_WORKER_FACTORY", FACTORY)
    return ServerProcess(gunicorn_argv(worker_class, *extra), base_env(devserver.url, queue, markers, **env),
                         tmp_path / f"gunicorn-{worker_class}.log")


def _two_registered(client: Any, queue: str, server: ServerProcess, timeout: float = 60.0) -> List[int]:
    def ready() -> Any:
        pids = active_pids(client, queue)
        return pids if len(pids) == 2 and set(pids) == server.web_workers() else None

    try:
        return list(wait_for(ready, timeout, "two registrations, one from each web worker"))
    except AssertionError:
        raise AssertionError(f"registrations {registrations(client, queue)}; web workers "
                             f"{server.web_workers()}\n{server.log()}") from None


def _finish_with_local_worker(client: Any, queue: str, workflow_id: str) -> Any:
    """Run the last workflow task in this process (after the web server stopped)."""
    worker = Worker(client, task_queue=queue, workflows=[Flow], activities=[work], poll_timeout=2.0, pool="threads")
    worker.run_until(workflow_id=workflow_id, timeout=30)
    return client.get_result(workflow_id, timeout=10)


@pytest.mark.parametrize("worker_class", CLASSES)
def test_serves_http_runs_workflows_and_drains_on_sigterm(worker_class: str, devserver: Any, client: Any, queue: str,
                                                         markers: Path, tmp_path: Path) -> None:
    with _server(devserver, queue, markers, tmp_path, worker_class) as server:
        pids = _two_registered(client, queue, server)
        assert server.pid not in pids  # never in the master

        # HTTP requests and workflows at once: the embedded workers run activities in the web workers.
        handles = [client.start_workflow("embed.flow", f"t{i}", 0.3, task_queue=queue) for i in range(8)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: server.get("/"), range(40)))
        assert all(status == 200 and body.startswith(b"hello from ") for status, body in answers)
        served_by = {int(body.split()[-1]) for _, body in answers}
        assert served_by <= set(pids)
        results = [h.result(timeout=30) for h in handles]
        assert {r["attempt"] for r in results} == {1}
        assert {r["pid"] for r in results} <= set(pids)

        status, body = server.get("/readyz")
        assert status == 200, body
        probe = json.loads(body)
        assert probe["status"] == "ok" and probe["workers"][0]["task_queue"] == queue
        assert server.get("/healthz")[0] == 200

        # SIGTERM with an activity in flight: it finishes inside graceful_timeout, the master exits 0.
        slow = client.start_workflow("embed.flow", "term", 3.0, task_queue=queue)
        runner = wait_for(lambda: marker(markers, "term.1.start"), 20, "the activity started")
        signalled = time.monotonic()
        server.signal(signal.SIGTERM)
        code = server.wait(30)
        elapsed = time.monotonic() - signalled
        log = server.log()
        assert code == 0, log
        assert elapsed < 15, f"took {elapsed:.1f} s, graceful_timeout is 15 s\n{log}"
        assert marker(markers, "term.1.done") == runner, log  # the same process finished the attempt
        assert marker(markers, "term.2.start") is None
        assert "drained and deregistered" in log
        assert {w["status"] for w in registrations(client, queue)} == {"deregistered"}
    result = _finish_with_local_worker(client, queue, slow.workflow_id)
    assert result == {"pid": runner, "attempt": 1}


@pytest.mark.parametrize("worker_class", CLASSES)
def test_sighup_reload_drains_old_workers_and_registers_new_ones(worker_class: str, devserver: Any, client: Any,
                                                                 queue: str, markers: Path, tmp_path: Path) -> None:
    # The factory named by the config file's SYNC_WORKER_FACTORY variable, not the environment.
    with _server(devserver, queue, markers, tmp_path, worker_class, SYNC_WORKER_FACTORY="",
                 EMBED_CONFIG_FACTORY=FACTORY) as server:
        old = _two_registered(client, queue, server)
        handle = client.start_workflow("embed.flow", "hup", 3.0, task_queue=queue)
        runner = wait_for(lambda: marker(markers, "hup.1.start"), 20, "the activity started")
        server.signal(signal.SIGHUP)
        new = wait_for(lambda: [p for p in active_pids(client, queue) if p not in old] if len(
            [p for p in active_pids(client, queue) if p not in old]) == 2 else None, 40, "two new registrations")
        result = handle.result(timeout=30)
        assert result == {"pid": runner, "attempt": 1}, server.log()  # the old worker finished it: no run lost
        wait_for(lambda: not any(alive(p) for p in old), 20, "the old web workers exited")
        statuses = {int(w["process_metrics"]["process_id"]): w["status"] for w in registrations(client, queue)}
        assert all(statuses[p] == "deregistered" for p in old), statuses
        assert all(statuses[p] == "active" for p in new), statuses
        assert set(new) == server.web_workers()
        # The new generation serves both HTTP and workflows.
        after = client.start_workflow("embed.flow", "after", 0.2, task_queue=queue)
        assert after.result(timeout=30)["pid"] in new
        assert server.get("/readyz")[0] == 200


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("worker_class", CLASSES)
def test_web_workers_busy_with_a_request_past_the_graceful_timeout_still_deregister(
        worker_class: str, stop: str, devserver: Any, client: Any, queue: str, markers: Path, tmp_path: Path) -> None:
    """The stop reaches the web worker running an activity in the middle of a request that outlives
    graceful_timeout (6 s), so gunicorn's worker_exit hook never runs there: the master kills the
    worker. SIGTERM (graceful): the drain started by the signal ends the activity in that process
    and deregisters before the kill. SIGINT (quick: SIGQUIT to the workers, whose handler raises
    SystemExit in the request, so worker_exit runs with a cold drain): the activity is abandoned
    without a report and that worker keeps its registration, as every cold stop does (the server
    recovers the lease; the retry completes the run); the other web worker deregisters."""
    graceful = stop == "SIGTERM"
    with _server(devserver, queue, markers, tmp_path, worker_class, EMBED_GRACEFUL_TIMEOUT="6") as server:
        old = _two_registered(client, queue, server)
        handle = client.start_workflow("embed.flow", "busy", 3.0, task_queue=queue)
        runner = wait_for(lambda: marker(markers, "busy.1.start"), 20, "the activity started")
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            requests = [pool.submit(server.get, "/?sleep=30&mark=req", 40) for _ in range(8)]
            wait_for(lambda: marker(markers, f"req.{runner}") == runner, 20,
                     "the web worker running the activity busy with a request")
            signalled = time.monotonic()
            server.signal(getattr(signal, stop))
            server.wait(30)
            elapsed = time.monotonic() - signalled
            answers = [f.exception() or f.result() for f in requests]
        log = server.log()
        assert elapsed < 12, f"took {elapsed:.1f} s, graceful_timeout is 6 s\n{log[-5000:]}"
        assert not [a for a in answers if isinstance(a, tuple) and a[0] == 200], answers  # none outlived its worker
        assert not any(alive(p) for p in old)
        statuses = {int(w["process_metrics"]["process_id"]): w["status"] for w in registrations(client, queue)}
        if graceful:
            assert all(statuses[p] == "deregistered" for p in old), (statuses, log[-5000:])
            assert marker(markers, "busy.1.done") == runner, log[-5000:]
        else:
            assert statuses == {p: "active" if p == runner else "deregistered" for p in old}, (statuses, log[-5000:])
            assert "it was abandoned without reporting and the registration is kept" in log
    result = _finish_with_local_worker(client, queue, handle.workflow_id)
    assert result == ({"pid": runner, "attempt": 1} if graceful else {"pid": os.getpid(), "attempt": 2}), result


@pytest.mark.parametrize("worker_class", CLASSES)
def test_kill_9_of_a_web_worker_mid_activity_is_retried_and_completes(worker_class: str, devserver: Any,
                                                                      client: Any, queue: str, markers: Path,
                                                                      tmp_path: Path) -> None:
    with _server(devserver, queue, markers, tmp_path, worker_class) as server:
        _two_registered(client, queue, server)
        handle = client.start_workflow("embed.flow", "kill", 2.0, task_queue=queue)
        victim = wait_for(lambda: marker(markers, "kill.1.start"), 20, "the activity started")
        os.kill(victim, signal.SIGKILL)
        result = handle.result(timeout=60)
        # The attempt died with its process; after the 2 s heartbeat timeout the server retried it elsewhere.
        assert result["attempt"] >= 2 and result["pid"] != victim, result
        assert marker(markers, "kill.1.done") is None
        assert server.get("/")[0] == 200
        wait_for(lambda: len(server.web_workers()) == 2, 30, "gunicorn replaced the killed web worker")


@pytest.mark.parametrize("worker_class", ["sync", "gevent"])
def test_preload_starts_nothing_in_the_master(worker_class: str, devserver: Any, client: Any, queue: str,
                                              markers: Path, tmp_path: Path) -> None:
    with _server(devserver, queue, markers, tmp_path, worker_class, "--preload") as server:
        pids = _two_registered(client, queue, server)
        assert server.pid not in pids
        assert thread_count(server.pid) == 1  # no thread in the master that a fork would kill
        handle = client.start_workflow("embed.flow", "pre", 0.2, task_queue=queue)
        assert handle.result(timeout=30)["pid"] in pids
        server.signal(signal.SIGTERM)
        assert server.wait(30) == 0


# The gevent class recycles ~4x slower (its loop sleeps a second per turn): sync and gthread prove it.
@pytest.mark.parametrize("worker_class", ["sync", "gthread"])
def test_max_requests_recycling_loses_no_run_and_leaves_no_duplicate_registration(
        worker_class: str, devserver: Any, client: Any, queue: str, markers: Path, tmp_path: Path) -> None:
    recycles_wanted = 20
    with _server(devserver, queue, markers, tmp_path, worker_class, "--max-requests", "50",
                 "--max-requests-jitter", "0") as server:
        _two_registered(client, queue, server)
        handles = []
        served = 0

        def booted() -> int:
            return server.log().count("Booting worker with pid")

        deadline = time.monotonic() + 240
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            while booted() - 2 < recycles_wanted:
                assert time.monotonic() < deadline, f"only {booted() - 2} recycles\n{server.log()[-4000:]}"
                handles.append(client.start_workflow("embed.flow", f"mr{len(handles)}", 0.3, task_queue=queue))
                answers = list(pool.map(lambda _: _get_across_a_recycle(server), range(20)))
                assert all(status == 200 for status, _ in answers)
                served += len(answers)
        results = [h.result(timeout=60) for h in handles]
        assert len(results) == len(handles) and all(r["attempt"] >= 1 for r in results)
        # Once recycling settles, the only active registrations are the two live web workers'.
        wait_for(lambda: set(active_pids(client, queue)) == server.web_workers() and len(
            active_pids(client, queue)) == 2, 60, "exactly one active registration per live web worker")
        rows = registrations(client, queue)
        pids = [int(w["process_metrics"]["process_id"]) for w in rows]
        assert len(pids) == len(set(pids)), "a process registered twice"
        stale = [w for w in rows if w["status"] != "deregistered" and w["status"] != "active"]
        assert not stale, stale
        assert len(rows) >= recycles_wanted + 2 and served >= 50 * recycles_wanted


def _get_across_a_recycle(server: Any) -> Any:
    """``GET /``, once more if gunicorn itself reset it: a gthread worker that reaches
    ``--max-requests`` can still accept a connection it then drops (benoitc/gunicorn#3038, open).
    The embedded workers are what this test is about, not that web request."""
    try:
        return server.get("/", timeout=30)
    except ConnectionResetError:
        return server.get("/", timeout=30)


def test_one_per_host_runs_the_workers_in_one_process_and_fails_over(devserver: Any, client: Any, queue: str,
                                                                     markers: Path, tmp_path: Path) -> None:
    lock = tmp_path / "host.lock"
    with ServerProcess(gunicorn_argv("gthread", workers=3), base_env(
            devserver.url, queue, markers, SYNC_WORKER_FACTORY=FACTORY, SYNC_WORKER_ONE_PER_HOST="1",
            SYNC_WORKER_LOCK_FILE=str(lock)), tmp_path / "gunicorn-one.log") as server:
        wait_for(lambda: len(server.web_workers()) == 3, 30, "three web workers")

        def live_active() -> List[int]:
            return [p for p in active_pids(client, queue) if alive(p)]

        holder = wait_for(lambda: live_active() if len(live_active()) == 1 else None, 30, "one worker")[0]
        time.sleep(3)  # the others stand by (they retry the lock every 2 s) and stay off the server
        assert live_active() == [holder] and holder in server.web_workers()
        statuses = {server.get("/readyz")[0] for _ in range(12)}  # standing-by processes are healthy too
        assert statuses == {200}
        assert client.start_workflow("embed.flow", "one", 0.2, task_queue=queue).result(timeout=30)["pid"] == holder
        os.kill(holder, signal.SIGKILL)  # the kernel drops its lock; a standing-by process takes over
        successor = wait_for(lambda: [p for p in live_active() if p != holder], 30, "another process took over")
        assert len(successor) == 1 and successor[0] in server.web_workers()
        assert client.start_workflow("embed.flow", "two", 0.2, task_queue=queue).result(timeout=30)["pid"] == \
            successor[0]
        server.signal(signal.SIGTERM)
        assert server.wait(30) == 0
