"""Our conftest for Celery's integration suite run through ``sync_worker_celery``.

Staged as ``t/integration/conftest.py`` in place of Celery's (which builds a real Celery worker).
For the session it starts, each in its own process and stopped at the end:

* ``redis-server`` on a free port: the suite's tasks (``redis_echo``, ``redis_count``...) write
  to Redis as a side channel the tests read; results and messages never go through it;
* the dev server (``sync-worker devserver``, in-memory SQLite);
* one worker serving one task at a time. Celery's test worker runs one task at a time
  (``celery.contrib.testing.worker.start_worker`` defaults to ``concurrency=1``) and some tests
  rely on it (``test_expired`` queues tasks behind sleeping ones), so ours does too
  (``SW_CELERY_SUITE_CONCURRENCY`` changes it). As Celery's ``celery_session_worker`` does, it runs
  in the test process, on threads (``sync_worker_celery.worker.WorkerGroup``): the signal handlers
  a test connects (``task_received``...) and its ``caplog`` see the worker's side.
  ``SW_CELERY_SUITE_WORKER=process`` runs it as ``sync-worker celery -A t.integration._worker_app
  worker -c 1`` instead.

Under ``pytest-xdist`` (``run.py`` runs ``-n``) every test process starts its own three, so the
tests of one process never share a queue, a worker slot or a Redis key with another's: each sees
the world Celery's suite assumes (one worker, one task at a time), and the processes only share
the machine.

Tests listed in docs/celery.md as not passing (``SW_CELERY_SUITE_LISTED``, a file of test ids
written by ``run.py``) get a tighter per-test limit (``SW_CELERY_SUITE_LISTED_TIMEOUT``, 25 s)
and no flaky reruns: most of them fail by waiting out a 60 s ``.get()`` timeout, twice.

It provides the fixtures and helpers Celery's conftest does (``manager``, ``app``,
``celery_session_app``, ``celery_session_worker``, ``flaky``, ``get_redis_connection``,
``get_active_redis_channels``, ``check_for_logs``, ``TEST_BACKEND``). ``app.conf.result_backend``
names the private Redis, as in Celery's own run, so the tests that need Redis as their side channel
run; the facade accepts the setting and ignores it (results are the server's).
"""

import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from sync_worker_celery import Celery
from sync_worker_celery.exceptions import TimeoutError
from t.integration.tasks import get_redis_connection

logger = logging.getLogger(__name__)

TEST_BROKER = os.environ.get("TEST_BROKER", "pyamqp://")
TEST_BACKEND = os.environ.get("TEST_BACKEND", "redis://")
ROOT = Path(__file__).resolve().parents[2]  # the staging folder (holds t/)

RETRYABLE_EXCEPTIONS = (OSError, ConnectionError, TimeoutError)
WORKER_MODE = os.environ.get("SW_CELERY_SUITE_WORKER", "thread")


def is_retryable_exception(exc):
    return isinstance(exc, RETRYABLE_EXCEPTIONS)


# Celery's conftest reruns a test up to 5 times on a retryable error; SW_CELERY_SUITE_RERUNS lowers
# that (the CI leg runs with 1: stricter than Celery's own run, and a hanging test costs less).
_flaky = pytest.mark.flaky(reruns=int(os.environ.get("SW_CELERY_SUITE_RERUNS", "5")), reruns_delay=1,
                           cause=is_retryable_exception)
_timeout = pytest.mark.timeout(timeout=300)


def flaky(fn):
    return _timeout(_flaky(fn))


__all__ = ("flaky", "get_active_redis_channels")


def get_active_redis_channels():
    return get_redis_connection().execute_command("PUBSUB CHANNELS")


def check_for_logs(caplog, message: str, max_wait: float = 1.0, interval: float = 0.1) -> bool:
    start_time = time.monotonic()
    while time.monotonic() - start_time < max_wait:
        if any(re.search(message, record.message) for record in caplog.records):
            return True
        time.sleep(interval)
    return False


def _die_with_parent():
    """A service ends with the test process that started it, even when that one is killed (Linux)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


class _Services:
    """The session's processes; logs in a scratch folder (kept when SW_CELERY_SUITE_LOGS names one)."""

    def __init__(self):
        self.dir = Path(os.environ.get("SW_CELERY_SUITE_LOGS") or tempfile.mkdtemp(prefix="celery-suite-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.procs = []
        self.redis_port = None
        self.server_url = None

    def spawn(self, name, argv, env=None):
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(argv, cwd=str(ROOT), env=env or os.environ.copy(), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent)
        self.procs.append((name, proc, log))
        return proc

    def text(self, name):
        return (self.dir / f"{name}.log").read_text(errors="replace")

    def start(self):
        redis_server = shutil.which("redis-server")
        if redis_server is None:
            raise RuntimeError("redis-server is not installed (scripts/services.sh installs it): the suite's tasks "
                               "write to Redis")
        self.redis_port = _free_port()
        self.spawn("redis", [redis_server, "--bind", "127.0.0.1", "--port", str(self.redis_port), "--save", "",
                             "--appendonly", "no"])
        os.environ["REDIS_HOST"] = "127.0.0.1"
        os.environ["REDIS_PORT"] = str(self.redis_port)
        _wait(lambda: self._answers(self.redis_port), 30, "redis-server")
        port = _free_port()
        self.spawn("devserver", [sys.executable, "-m", "sync_worker", "devserver", "--port", str(port),
                                 "--log-level", "warning", "--query-timeout", "30"])
        _wait(lambda: self._answers(port), 60, "the dev server")
        self.server_url = f"http://127.0.0.1:{port}"
        os.environ["DURABLE_WORKFLOW_SERVER_URL"] = self.server_url
        os.environ.setdefault("DURABLE_WORKFLOW_HEARTBEAT_INTERVAL", "2")
        if WORKER_MODE != "process":
            return  # the worker starts with the session app (celery_session_worker)
        env = os.environ.copy()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        concurrency = os.environ.get("SW_CELERY_SUITE_CONCURRENCY", "1")
        self.spawn("worker", [sys.executable, "-m", "sync_worker", "celery", "-A", "t.integration._worker_app",
                              "worker", "-c", concurrency, "-l", "info"], env=env)
        _wait(lambda: "ready: queues" in self.text("worker") or self.procs[-1][1].poll() is not None, 120,
              "the worker's ready line")
        if self.procs[-1][1].poll() is not None:
            raise RuntimeError("the worker exited:\n" + self.text("worker")[-4000:])

    @staticmethod
    def _answers(port):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    def start_thread_worker(self, app):
        from sync_worker_celery.worker import WorkerGroup

        concurrency = int(os.environ.get("SW_CELERY_SUITE_CONCURRENCY", "1"))
        handler = logging.FileHandler(self.dir / "worker.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(threadName)s %(message)s"))
        for name in ("sync_worker", "celery"):
            logging.getLogger(name).addHandler(handler)
        logging.getLogger("celery").setLevel(logging.INFO)  # the process mode's "-l info": task log lines
        group = WorkerGroup(app, app.workers_for(None, concurrency=concurrency, pool="threads"))
        group.start()
        if not group.wait_ready(120):
            raise RuntimeError(f"the worker did not start: {group.errors}")
        self.group = group
        return group

    def stop(self):
        group = getattr(self, "group", None)
        if group is not None:
            group.stop()
            group.join(30)
        for _name, proc, log in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            log.close()
        logger.info("celery suite logs: %s", self.dir)


_services = _Services()


def _runs_tests(config):
    """False in pytest-xdist's controller process (its test processes start their own services)."""
    if hasattr(config, "workerinput"):
        return True
    return not getattr(config.option, "numprocesses", None) or getattr(config.option, "dist", "no") == "no"


def pytest_configure(config):
    if _runs_tests(config):
        name = config.workerinput["workerid"] if hasattr(config, "workerinput") else ""
        if name:
            _services.dir = _services.dir / name
            _services.dir.mkdir(parents=True, exist_ok=True)
        _services.start()


def _listed_ids():
    path = os.environ.get("SW_CELERY_SUITE_LISTED")
    if not path or not Path(path).exists():
        return set()
    return {line.strip() for line in Path(path).read_text().splitlines() if line.strip()}


def _is_listed(nodeid, listed):
    # the table's ids: "test_chord::test_generator" (a parametrized test by its base name)
    test_id = nodeid.split("/")[-1]
    base = test_id.split("[")[0]
    return any(key in (test_id, base) or test_id.endswith("::" + key) or base.endswith("::" + key) for key in listed)


def pytest_collection_modifyitems(session, config, items):
    listed = _listed_ids()
    if not listed:
        return
    limit = float(os.environ.get("SW_CELERY_SUITE_LISTED_TIMEOUT", "25"))
    for item in items:
        if _is_listed(item.nodeid, listed):
            # prepended: the closest marker wins over the test's own @flaky (timeout 300, reruns)
            item.add_marker(pytest.mark.timeout(timeout=limit), append=False)
            item.add_marker(pytest.mark.flaky(reruns=0), append=False)
            item.listed_limit = limit


class _SubtestsWithDeadline:
    """``subtests`` for a listed test: past its limit, the next ``subtests.test()`` fails the test.
    (pytest-timeout's failure raised inside a subtest only fails that subtest; the test goes on.)"""

    def __init__(self, inner, deadline):
        self._inner = inner
        self._deadline = deadline

    def test(self, *args, **kwargs):
        if time.monotonic() > self._deadline:
            pytest.fail("Timeout: over the limit of a test listed in docs/celery.md as not passing")
        return self._inner.test(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


@pytest.fixture
def subtests(subtests, request):
    limit = getattr(request.node, "listed_limit", None)
    if limit is None:
        return subtests
    return _SubtestsWithDeadline(subtests, time.monotonic() + limit)


def pytest_unconfigure(config):
    _services.stop()


class Manager:
    """What Celery's ``celery.contrib.testing.manager.Manager`` offers the suite."""

    def __init__(self, app):
        self.app = app

    def inspect(self, timeout=1.0):
        return self.app.control.inspect(timeout=timeout)

    def join(self, r, propagate=False, max_retries=10, **kwargs):
        return r.get(propagate=propagate, **kwargs)

    def wait_until_idle(self, timeout=30):
        inspect = self.inspect()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            active = inspect.active() or {}
            if not any(active.values()):
                return
            time.sleep(0.2)
        raise TimeoutError("the worker did not become idle")

    def assert_accepted(self, ids, interval=0.5, desc="waiting for tasks to be accepted", **policy):
        raise NotImplementedError("Manager.assert_accepted needs inspect().active()/reserved() by task id")

    def assert_result_tasks_in_progress_or_completed(self, async_results, **policy):
        raise NotImplementedError("Manager.assert_result_tasks_in_progress_or_completed is not provided")


@pytest.fixture(scope="session")
def celery_config():
    redis = f"redis://127.0.0.1:{_services.redis_port}/0"
    return {"broker_url": redis, "result_backend": redis, "result_extended": True,
            "durable_workflow_server_url": _services.server_url}


@pytest.fixture(scope="session")
def celery_session_app(celery_config):
    app = Celery("celery_suite", set_as_current=False)
    app.conf.update(celery_config)
    app.conf.durable_workflow_heartbeat_interval = float(os.environ["DURABLE_WORKFLOW_HEARTBEAT_INTERVAL"])
    from t.integration.tasks import ClassBasedAutoRetryTask

    app.register_task(ClassBasedAutoRetryTask)
    yield app
    app.close()


@pytest.fixture(scope="session", autouse=True)
def celery_session_worker(celery_session_app):
    """The session's worker (its log: ``worker.log``): on threads in this process, or the
    ``sync-worker celery`` process started with the services (``SW_CELERY_SUITE_WORKER=process``).
    Autouse: a few of Celery's tests ask for no fixture and rely on its session worker."""
    if WORKER_MODE != "process" and getattr(_services, "group", None) is None:
        _services.start_thread_worker(celery_session_app)
    return _services


@pytest.fixture
def celery_app(celery_session_app):
    return celery_session_app


@pytest.fixture
def app(celery_app):
    yield celery_app


@pytest.fixture
def manager(app, celery_session_worker):
    manager = Manager(app)
    yield manager
    try:
        manager.wait_until_idle()
    except Exception as e:
        logger.warning("Failed to stop Celery test manager cleanly: %s", e)


#: Settings some of Celery's tests change on the session app and leave changed for the tests that
#: follow them in Celery's file order; with the tests spread over processes that order is gone, so
#: each test starts from the session's values.
_TEST_LOCAL_SETTINGS = ("task_allow_error_cb_on_chord_header", "task_always_eager")


@pytest.fixture(autouse=True)
def _session_settings(celery_session_app):
    saved = {key: celery_session_app.conf.get(key) for key in _TEST_LOCAL_SETTINGS}
    yield
    for key, value in saved.items():
        celery_session_app.conf[key] = value


@pytest.fixture(autouse=True)
def ZZZZ_set_app_current(app):
    app.set_current()
    app.set_default()
