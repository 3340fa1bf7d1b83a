"""``sync_worker.embed`` in this process, against the real dev server over real sockets.

start/stop/status, readiness flipping at the start of a drain, fork safety (a real
``os.fork``), the one-process-per-host lock, the factory checks, the health middleware.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from sync_worker import embed, health
from sync_worker.client import Client
from sync_worker.embed import EmbedConfigError, EmbedError, ForkedHandleError, HealthMiddleware
from sync_worker.embed.hostlock import HostLock
from sync_worker.embed.settings import read_settings
from sync_worker.worker import Worker, WorkerState

from ._servers import active_pids, marker, registrations, wait_for
from .worker_app import Flow, work


@pytest.fixture
def env(devserver: Any, queue: str, markers: Path, monkeypatch: pytest.MonkeyPatch) -> Dict[str, str]:
    for name in list(os.environ):
        if name.startswith("SYNC_WORKER_") and name != "SYNC_WORKER_TEST_POOL":
            monkeypatch.delenv(name)
    values = {"DURABLE_WORKFLOW_SERVER_URL": devserver.url, "EMBED_TEST_QUEUE": queue,
              "EMBED_TEST_DIR": str(markers)}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture(autouse=True)
def stopper() -> Iterator[List[Any]]:
    """Stops what a test started and forgets this process's handle, so tests stay independent."""
    started: List[Any] = []
    yield started
    for handle in started:
        if handle.pid == os.getpid() and handle.mode != "stopped":
            handle.stop(5, cold=True)
    embed._handles.pop(os.getpid(), None)


def _start(stopper: List[Any], *args: Any, **kwargs: Any) -> Any:
    handle = embed.start(*args, **kwargs)
    stopper.append(handle)
    return handle


def _running(handle: Any, timeout: float = 15) -> None:
    wait_for(lambda: handle.workers and all(w.state is WorkerState.RUNNING for w in handle.workers), timeout,
             "the embedded workers run")


def test_start_runs_workflows_and_stop_deregisters(env: Dict[str, str], client: Client, queue: str,
                                                   stopper: List[Any]) -> None:
    handle = _start(stopper, "tests.integrations.embed.worker_app:build", concurrency=2)
    assert embed.current() is handle and handle.pid == os.getpid() and handle.pool == "threads"
    _running(handle)
    assert handle.workers[0].max_concurrent_activity_tasks == 2
    result = client.start_workflow("embed.flow", "core", 0.1, task_queue=queue).result(timeout=20)
    assert result == {"pid": os.getpid(), "attempt": 1}
    status = handle.status()
    assert status.mode == "running" and status.ready and status.live and len(status.workers) == 1
    assert handle.stop(10) is True
    assert handle.mode == "stopped"
    assert [w["status"] for w in registrations(client, queue)] == ["deregistered"]
    assert handle.workers[0] not in health.running_workers()
    again = _start(stopper, "tests.integrations.embed.worker_app:build")
    assert again is not handle and embed.current() is again
    again.stop(10)


def test_readiness_flips_at_the_start_of_a_drain(env: Dict[str, str], client: Client, queue: str, markers: Path,
                                                 stopper: List[Any]) -> None:
    handle = _start(stopper, "tests.integrations.embed.worker_app:build")
    _running(handle)
    app = HealthMiddleware(lambda environ, start_response: [])
    assert _call(app, "/readyz")[0] == 200
    client.start_workflow("embed.flow", "drain", 1.5, task_queue=queue)
    wait_for(lambda: marker(markers, "drain.1.start"), 20, "the activity started")
    handle.request_drain(10)  # what the SIGTERM handler does: flags only
    code, body = _call(app, "/readyz")
    assert code == 503 and "draining" in body["reason"]  # before the monitor even acted
    assert _call(app, "/healthz")[0] == 200
    worker = handle.workers[0]
    wait_for(lambda: worker.state is WorkerState.DRAINING, 5, "the worker drains")
    snapshot = worker.status()  # the worker's own status says the same while it drains
    assert snapshot.ready is False and snapshot.ready_reason == "draining" and snapshot.live is True
    assert handle.stop(10) is True
    assert marker(markers, "drain.1.done") == os.getpid()
    assert _call(app, "/readyz")[0] == 503


def test_several_workers_one_per_task_queue(env: Dict[str, str], client: Client, queue: str,
                                            stopper: List[Any]) -> None:
    handle = _start(stopper, "tests.integrations.embed.worker_app:build_two", concurrency=1)
    _running(handle)
    assert sorted(w.task_queue for w in handle.workers) == [queue, f"{queue}-b"]
    results = [client.start_workflow("embed.flow", f"q{i}", 0.1, task_queue=q).result(timeout=20)
               for i, q in enumerate([queue, f"{queue}-b"])]
    assert [r["attempt"] for r in results] == [1, 1]
    _, body = handle.probe("ready")
    assert len(body["workers"]) == 2
    assert handle.stop(10)
    assert {w["status"] for q in (queue, f"{queue}-b") for w in registrations(client, q)} == {"deregistered"}


def test_a_handle_used_in_a_forked_child_is_refused_and_can_restart_there(
        env: Dict[str, str], client: Client, queue: str, stopper: List[Any]) -> None:
    handle = _start(stopper, "tests.integrations.embed.worker_app:build")
    _running(handle)
    parent_transport = client._transport  # built before the fork, used after it in the child
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        report: Dict[str, Any] = {}
        try:
            try:
                handle.status()
            except ForkedHandleError as error:
                report["refused"] = error.started_pid == handle.pid
            report["current"] = embed.current() is None
            report["fresh_session"] = parent_transport.pid == os.getpid()
            report["client_works"] = isinstance(client.list_workers(task_queue=queue).workers, list)
            child = handle.ensure_running()
            report["restarted"] = child is not handle and child.pid == os.getpid() and embed.current() is child
            wait_for(lambda: os.getpid() in active_pids(client, queue), 15, "the child's worker registered")
            report["registered"] = True
            report["stopped"] = child.stop(10)
        except BaseException as error:  # pragma: no cover - reported to the parent
            report["error"] = repr(error)
        os.write(write_end, json.dumps(report).encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    with os.fdopen(read_end) as pipe:
        report = json.loads(pipe.read() or "{}")
    assert report == {"refused": True, "current": True, "fresh_session": True, "client_works": True,
                      "restarted": True, "registered": True, "stopped": True}
    assert handle.status().ready  # the parent's handle is untouched
    assert handle.stop(10)


def test_start_is_refused_in_a_forking_parent(env: Dict[str, str]) -> None:
    embed.mark_forking_parent("a test master")
    try:
        with pytest.raises(EmbedError, match="a test master"):
            embed.start("tests.integrations.embed.worker_app:build")
    finally:
        embed._forking_parents.pop(os.getpid(), None)
    assert embed.current() is None


def test_one_per_host_stands_by_then_takes_over(env: Dict[str, str], client: Client, queue: str, tmp_path: Path,
                                                stopper: List[Any]) -> None:
    path = str(tmp_path / "host.lock")
    other = HostLock(path)  # another process of the host (flock conflicts between open files)
    assert other.try_acquire()
    handle = _start(stopper, "tests.integrations.embed.worker_app:build", one_per_host=True, lock_path=path,
                    standby_retry_seconds=0.2)
    assert handle.mode == "standby" and handle.workers == []
    code, body = handle.probe("ready")
    assert code == 200 and body["reason"].startswith("standby")
    assert active_pids(client, queue) == []
    other.release()
    _running(handle)
    assert handle.mode == "running" and active_pids(client, queue) == [os.getpid()]
    assert handle.stop(10)
    assert other.try_acquire()  # the lock was released with the drain
    other.release()
    with pytest.raises(EmbedConfigError):  # a factory that fails never keeps the host's lock
        embed.start(lambda: 42, one_per_host=True, lock_path=path)
    assert other.try_acquire()
    other.release()


def test_factory_and_settings_errors_are_clear(env: Dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EmbedConfigError, match="module:attr"):
        embed.start("no_colon_here")
    with pytest.raises(EmbedConfigError, match="cannot import"):
        embed.start("tests.integrations.embed.no_such_module:build")
    with pytest.raises(EmbedConfigError, match="has no attribute"):
        embed.start("tests.integrations.embed.worker_app:nothing")
    with pytest.raises(EmbedConfigError, match="not a Worker"):
        embed.start(lambda: 42)
    with pytest.raises(EmbedConfigError, match="two workers for one task queue"):
        embed.start(lambda client: [Worker(client, task_queue="same", activities=[work]),
                                    Worker(client, task_queue="same", workflows=[Flow])])
    with pytest.raises(EmbedConfigError, match="no worker factory"):
        embed.start()
    with pytest.raises(EmbedConfigError, match="concurrency"):
        embed.start("tests.integrations.embed.worker_app:build", concurrency=0)
    monkeypatch.delenv("DURABLE_WORKFLOW_SERVER_URL")
    with pytest.raises(EmbedConfigError, match="DURABLE_WORKFLOW_SERVER_URL"):
        embed.start("tests.integrations.embed.worker_app:build")
    assert embed.current() is None  # nothing half-started was kept


def test_settings_config_file_wins_over_environment() -> None:
    environ = {"SYNC_WORKER_FACTORY": "env:factory", "SYNC_WORKER_CONCURRENCY": "3", "SYNC_WORKER_ONE_PER_HOST": "1"}
    from_env = read_settings({}, environ)
    assert (from_env.factory, from_env.concurrency, from_env.one_per_host) == ("env:factory", 3, True)
    from_cfg = read_settings({"SYNC_WORKER_FACTORY": "cfg:factory", "SYNC_WORKER_CONCURRENCY": 7,
                              "SYNC_WORKER_ONE_PER_HOST": False}, environ)
    assert (from_cfg.factory, from_cfg.concurrency, from_cfg.one_per_host) == ("cfg:factory", 7, False)
    assert read_settings({"SYNC_WORKER_FACTORY": "a:b"}, {}).concurrency is None  # not given: see below
    with pytest.raises(EmbedConfigError, match="boolean"):
        read_settings({"SYNC_WORKER_FACTORY": "a:b", "SYNC_WORKER_ONE_PER_HOST": "maybe"}, {})
    with pytest.raises(EmbedConfigError, match="positive integer"):
        read_settings({"SYNC_WORKER_FACTORY": "a:b", "SYNC_WORKER_CONCURRENCY": "many"}, {})


def test_middleware_passes_other_paths_and_answers_without_a_handle(env: Dict[str, str]) -> None:
    calls: List[str] = []

    def app(environ: Dict[str, Any], start_response: Any) -> List[bytes]:
        calls.append(environ["PATH_INFO"])
        start_response("200 OK", [])
        return [b"app"]

    middleware = HealthMiddleware(app)
    assert _call(middleware, "/healthz/other")[1] == b"app"
    assert _call(middleware, "/readyz", method="POST")[1] == b"app"
    assert calls == ["/healthz/other", "/readyz"]
    code, body = _call(middleware, "/readyz/")  # no embedded handle in this process: the registry probe
    assert code == 503 and body["reason"] == "no worker is running in this process"
    custom = HealthMiddleware(app, live_path="/-/live", ready_path="/-/ready")
    assert _call(custom, "/-/live")[0] == 503 and _call(custom, "/healthz")[1] == b"app"


def test_gunicorn_helpers_read_the_server_settings() -> None:
    from sync_worker.embed import gunicorn as hooks

    class Cfg:
        graceful_timeout = 20
        timeout = 12
        config = None

    class GeventWorker:
        cfg = Cfg()

    GeventWorker.__module__ = "gunicorn.workers.ggevent"

    class SyncWorker:
        cfg = Cfg()

    assert hooks.drain_budget(SyncWorker()) == 11.0  # min(graceful_timeout, timeout) - 1
    Cfg.timeout = 0
    assert hooks.drain_budget(SyncWorker()) == 19.0
    assert hooks._pool_for(GeventWorker()) == "gevent" and hooks._pool_for(SyncWorker()) == "threads"
    hooks.worker_exit(None, SyncWorker())  # no handle in this process (like the master): nothing to do


def _call(app: Any, path: str, method: str = "GET") -> Tuple[int, Any]:
    seen: Dict[str, Any] = {}

    def start_response(status: str, headers: List[Tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = status, headers

    body = b"".join(app({"PATH_INFO": path, "REQUEST_METHOD": method}, start_response))
    code = int(seen["status"].split()[0])
    if dict(seen["headers"]).get("Content-Type") == "application/json":
        return code, json.loads(body)
    return code, body


def test_restart_after_a_failed_run(env: Dict[str, str], client: Client, queue: str, devserver: Any,
                                    stopper: List[Any]) -> None:
    built: List[Worker] = []
    lock = threading.Lock()

    def factory(client: Any) -> Worker:
        with lock:
            first = not built
        # The first worker points at a closed port: its registration fails and the handle rebuilds it.
        target = Client("http://127.0.0.1:9", timeout=1, transport_retries=1) if first else client
        worker = Worker(target, task_queue=queue, workflows=[Flow], activities=[work], poll_timeout=2.0)
        built.append(worker)
        return worker

    handle = _start(stopper, factory)
    wait_for(lambda: len(built) >= 2 and built[-1].state is WorkerState.RUNNING, 20, "a rebuilt worker runs")
    assert built[0].state is WorkerState.FAILED
    assert client.start_workflow("embed.flow", "re", 0.1, task_queue=queue).result(timeout=20)["attempt"] == 1
    time.sleep(0.1)
    assert handle.stop(10)


def test_concurrency_and_client_rules_of_the_factory_call() -> None:
    from sync_worker.embed.factory import build_workers

    client = Client("http://127.0.0.1:9")
    seen: Dict[str, Any] = {}

    def plain() -> Worker:
        return Worker(client, task_queue="plain", activities=[work])

    def required(concurrency: int) -> Worker:
        seen["required"] = concurrency
        return Worker(client, task_queue="required", activities=[work], max_concurrent_activity_tasks=concurrency)

    def optional(concurrency: Any = None, client: Any = None) -> Worker:  # reads its own settings, like Django's
        seen["optional"], seen["optional_client"] = concurrency, client
        return Worker(client or Client("http://127.0.0.1:9"), task_queue="optional", activities=[work],
                      max_concurrent_activity_tasks=concurrency or 7)

    def needs_client(client: Any) -> Worker:
        return Worker(client, task_queue="needs", activities=[work])

    def build(factory: Any, concurrency: Any = None, **env: str) -> Worker:
        return build_workers(factory, concurrency=concurrency, pool="threads", environ=env,
                             client_factory=lambda: client)[0]

    assert build(plain).max_concurrent_activity_tasks == embed.DEFAULT_CONCURRENCY == 4
    assert build(required).max_concurrent_activity_tasks == 4 and seen["required"] == 4
    assert build(optional).max_concurrent_activity_tasks == 7
    assert seen["optional"] is None and seen["optional_client"] is None  # no server URL in the environment
    assert build(optional, DURABLE_WORKFLOW_SERVER_URL="http://x").max_concurrent_activity_tasks == 7
    assert seen["optional_client"] is client
    assert build(optional, 2).max_concurrent_activity_tasks == 2 and seen["optional"] == 2
    assert build(plain, 3).max_concurrent_activity_tasks == 3
    assert build(needs_client).client is client
