"""``manage.py durable_worker`` as a real process: readiness, warm and cold stops by real signals.

The test process is the "other process" that sends the signals; the worker subprocess uses
the test database (``SW_DJANGO_USE_TEST_DB``) and the test's dev server (the environment
variable overrides ``SYNC_WORKER['SERVER_URL']``).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from django.test import TransactionTestCase, tag
from shop.models import Order
from sync_worker_django.testing import DurableWorkflowTestMixin

from ._support import project_dir


class WorkerProcess:
    def __init__(self, server_url, *args, command=None):
        env = dict(os.environ, SW_DJANGO_USE_TEST_DB="1", DURABLE_WORKFLOW_SERVER_URL=server_url,
                   PYTHONUNBUFFERED="1", DJANGO_SETTINGS_MODULE="djsite.settings")
        command = command or [sys.executable, "manage.py", "durable_worker", "--health-port", "0", *args]
        self.proc = subprocess.Popen(command, cwd=project_dir(), env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines = []
        self.port = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            if "health probes on http://127.0.0.1:" in line:
                self.port = int(line.split("127.0.0.1:")[1].split("/")[0])

    def output(self):
        return "".join(self.lines)

    def probe(self, name):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/{name}", timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"worker exited early ({self.proc.returncode}):\n{self.output()}")
            if self.port is not None and self.probe("readyz")[0] == 200:
                return
            time.sleep(0.1)
        raise AssertionError(f"worker not ready in {timeout} s:\n{self.output()}")

    def wait_exit(self, timeout=60):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"worker did not exit in {timeout} s:\n{self.output()}") from None

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the process group: --reload has a child
        except ProcessLookupError:
            pass
        self.proc.wait(10)


@tag("process")
class CommandProcessTests(DurableWorkflowTestMixin, TransactionTestCase):
    pool = "threads"

    def launch(self, *args):
        worker = WorkerProcess(self.durable.server.url, "-Q", "shop", "-P", self.pool, *args)
        self.addCleanup(worker.kill)
        worker.wait_ready()
        return worker

    def wait_activity_started(self, handle, worker=None, timeout=30):
        """Until the server recorded ActivityStarted and, given the worker, its probe counts the task
        in flight: the server records the start when it leases the task, before the worker has read
        the answer, and a stop in between abandons that poll (the lease comes back when it expires),
        so a test that stops the worker "with work running" waits for the worker's own count."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run_id = handle.describe().run_id
            events = self.durable_client.get_history(handle.workflow_id, run_id)["events"]
            if any(e["event_type"] == "ActivityStarted" for e in events):
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the activity never started")
        while worker is not None and time.monotonic() < deadline:
            counts = [(w.get("concurrency") or {}).get("in_flight") for w in worker.probe("healthz")[1]["workers"]]
            if not any(isinstance(c, int) for c in counts) or any(c >= 1 for c in counts if isinstance(c, int)):
                return  # (a supervising parent without slots of its own reports no count: nothing to wait for)
            time.sleep(0.02)
        if worker is not None:
            raise AssertionError(f"the worker never counted the task in flight:\n{worker.output()}")

    def test_first_sigterm_drains_running_work_then_exits_0(self):
        order = Order.objects.create(customer="warm")
        worker = self.launch("--shutdown-timeout", "30")
        self.assertIn(f"on pool {self.pool}", worker.output())
        code, body = worker.probe("healthz")
        self.assertEqual((code, body["workers"][0]["task_queue"]), (200, "shop"))
        handle = self.durable_client.start_workflow("shop.slow_touch", order.pk, 2.0, task_queue="shop")
        self.wait_activity_started(handle, worker)
        worker.proc.send_signal(signal.SIGTERM)
        draining = None
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and worker.proc.poll() is None:
            try:
                code, body = worker.probe("readyz")
            except OSError:
                break
            if code == 503:
                draining = body
                break
            time.sleep(0.05)
        self.assertIsNotNone(draining, "readiness must fail as soon as the drain starts")
        self.assertEqual(worker.wait_exit(60), 0, worker.output())
        events = self.durable_client.get_history(handle.workflow_id, handle.describe().run_id)["events"]
        completed = [e for e in events if e["event_type"] == "ActivityCompleted"]
        self.assertEqual(len(completed), 1, "the running activity finished and was reported during the drain")
        order.refresh_from_db()
        self.assertEqual(order.status, "touched")
        workers = self.durable_client.list_workers(task_queue="shop").get("workers", [])
        self.assertFalse([w for w in workers if w.get("status") not in ("stopped", "deregistered", "offline")],
                         workers)

    def test_second_sigterm_is_a_cold_stop_exit_4(self):
        order = Order.objects.create(customer="cold")
        worker = self.launch("--shutdown-timeout", "60")
        handle = self.durable_client.start_workflow("shop.slow_touch", order.pk, 60.0, task_queue="shop")
        self.wait_activity_started(handle, worker)
        started = time.monotonic()
        worker.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        worker.proc.send_signal(signal.SIGTERM)
        self.assertEqual(worker.wait_exit(30), 4, worker.output())
        self.assertLess(time.monotonic() - started, 20)
        order.refresh_from_db()
        self.assertEqual(order.status, "new")  # the abandoned attempt never wrote

    def test_work_still_running_at_the_shutdown_deadline_exits_3(self):
        order = Order.objects.create(customer="deadline")
        worker = self.launch("--shutdown-timeout", "1")
        handle = self.durable_client.start_workflow("shop.slow_touch", order.pk, 60.0, task_queue="shop")
        self.wait_activity_started(handle, worker)
        worker.proc.send_signal(signal.SIGTERM)
        self.assertEqual(worker.wait_exit(30), 3, worker.output())
        self.assertIn("shutdown deadline", worker.output())

    def test_sigint_is_warm_too_and_sigquit_is_cold(self):
        worker = self.launch()
        worker.proc.send_signal(signal.SIGINT)
        self.assertEqual(worker.wait_exit(30), 0, worker.output())
        order = Order.objects.create(customer="quit")
        worker = self.launch("--shutdown-timeout", "60")
        handle = self.durable_client.start_workflow("shop.slow_touch", order.pk, 60.0, task_queue="shop")
        self.wait_activity_started(handle, worker)
        worker.proc.send_signal(signal.SIGQUIT)
        self.assertEqual(worker.wait_exit(30), 4, worker.output())

    def test_an_unreachable_server_exits_1(self):
        env = dict(os.environ, SW_DJANGO_USE_TEST_DB="1", DURABLE_WORKFLOW_SERVER_URL="http://127.0.0.1:9")
        done = subprocess.run([sys.executable, "manage.py", "durable_worker", "-P", self.pool],
                              cwd=project_dir(), env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("worker failed", done.stderr)

    def test_configuration_error_exits_2_naming_the_key(self):
        env = dict(os.environ, SW_DJANGO_USE_TEST_DB="1")
        done = subprocess.run([sys.executable, "manage.py", "durable_worker", "--server-url", "ftp://nowhere"],
                              cwd=project_dir(), env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertIn("sync_worker.E003", done.stderr)
        self.assertIn("SERVER_URL", done.stderr)


@tag("process")
class OtherLaunchTests(DurableWorkflowTestMixin, TransactionTestCase):
    def test_reload_restarts_the_workers_when_code_changes(self):
        worker = WorkerProcess(self.durable.server.url, "-Q", "shop", "--reload")
        self.addCleanup(worker.kill)
        worker.wait_ready()
        first = worker.probe("healthz")[1]["workers"][0]["worker_id"]
        module = os.path.join(project_dir(), "shop", "activities.py")
        deadline = time.monotonic() + 60
        second = first
        while second == first and time.monotonic() < deadline:
            os.utime(module)  # the autoreloader compares modification times
            time.sleep(1.0)
            try:
                second = worker.probe("healthz")[1]["workers"][0]["worker_id"]
            except (OSError, KeyError, IndexError, ValueError):
                continue
        self.assertNotEqual(second, first, worker.output())
        self.assertIn("reloading on code changes", worker.output())

    def test_reload_drains_running_tasks_before_it_restarts(self):
        order = Order.objects.create(customer="reload")
        worker = WorkerProcess(self.durable.server.url, "-Q", "shop", "--reload", "--shutdown-timeout", "30")
        self.addCleanup(worker.kill)
        worker.wait_ready()
        first = worker.probe("healthz")[1]["workers"][0]["worker_id"]
        handle = self.durable_client.start_workflow("shop.slow_touch", order.pk, 8.0, task_queue="shop")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            events = self.durable_client.get_history(handle.workflow_id, handle.describe().run_id)["events"]
            if any(e["event_type"] == "ActivityStarted" for e in events):
                break
            time.sleep(0.1)
        module = os.path.join(project_dir(), "shop", "activities.py")
        deadline = time.monotonic() + 6
        while "before the reload" not in worker.output() and time.monotonic() < deadline:
            os.utime(module)  # a code change mid-task (the reloader compares modification times)
            time.sleep(0.5)
        self.assertIn("touched by", handle.result(timeout=60), worker.output())
        events = self.durable_client.get_history(handle.workflow_id, handle.describe().run_id)["events"]
        started = [e for e in events if e["event_type"] == "ActivityStarted"]
        # The attempt that was running finished on the old process (no second attempt after a lost lease).
        self.assertEqual(len(started), 1, [e["event_type"] for e in events])
        self.assertIn("changed: draining running tasks before the reload", worker.output())
        deadline = time.monotonic() + 60
        second = first
        while second == first and time.monotonic() < deadline:
            try:
                second = worker.probe("healthz")[1]["workers"][0]["worker_id"]
            except (OSError, KeyError, IndexError, ValueError):
                pass
            time.sleep(0.5)
        self.assertNotEqual(second, first, worker.output())

    def test_no_autodiscover_leaves_nothing_to_run_and_says_so(self):
        env = dict(os.environ, SW_DJANGO_USE_TEST_DB="1", DURABLE_WORKFLOW_SERVER_URL=self.durable.server.url)
        done = subprocess.run([sys.executable, "manage.py", "durable_worker", "--no-autodiscover", "-Q", "inventory"],
                              cwd=project_dir(), env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertIn("'inventory' has nothing to run", done.stderr)

    def test_sync_worker_run_with_the_build_worker_factory(self):
        order = Order.objects.create(customer="factory")
        command = [sys.executable, "-m", "sync_worker", "run", "sync_worker_django.workers:build_worker", "-Q", "shop",
                   "--server-url", self.durable.server.url]
        worker = WorkerProcess(self.durable.server.url, command=command)
        self.addCleanup(worker.kill)
        handle = self.durable_client.start_workflow("shop.slow_touch", order.pk, 0.1, task_queue="shop")
        self.assertIn("touched by", handle.result(timeout=60), worker.output())
        worker.proc.send_signal(signal.SIGTERM)
        self.assertEqual(worker.wait_exit(30), 0, worker.output())


@tag("process")
class GeventCommandProcessTests(CommandProcessTests):
    """The same process tests with ``-P gevent``: re-executed patched first; psycopg on gevent sockets."""

    pool = "gevent"

    def test_the_re_executed_process_is_patched(self):
        worker = self.launch()
        self.assertIn("on pool gevent", worker.output())
        worker.proc.send_signal(signal.SIGTERM)
        self.assertEqual(worker.wait_exit(30), 0, worker.output())


@tag("process")
class PreforkCommandProcessTests(CommandProcessTests):
    """The same process tests with ``-P prefork``: two activity processes and the workflow process
    under a supervising parent (signals go to the parent only: the test starts a new session)."""

    pool = "prefork"

    def test_activities_run_in_children_and_django_connections_do_not_cross_the_fork(self):
        worker = self.launch("--max-tasks-per-child", "1")
        self.assertIn("on pool prefork (2 process(es)", worker.output())
        code, body = worker.probe("readyz")
        self.assertEqual(code, 200, body)
        self.assertEqual(sorted(c["tag"] for c in body["pool"]["children"]), ["a0.0", "a1.0", "w0.0"])
        pids = {w["pid"] for w in body["workers"]}
        self.assertEqual(len(pids), 3)
        self.assertNotIn(worker.proc.pid, pids)
        orders = [Order.objects.create(customer=f"fork-{index}") for index in range(3)]
        handles = [self.durable_client.start_workflow("shop.slow_touch", order.pk, 0.2, task_queue="shop")
                   for order in orders]
        for handle in handles:
            handle.result(timeout=60)
        for order in orders:
            order.refresh_from_db()
            self.assertEqual(order.status, "touched")  # each child opened its own database connection
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and worker.output().count("recycled (max-tasks-per-child") < 3:
            time.sleep(0.1)
        self.assertGreaterEqual(worker.output().count("recycled (max-tasks-per-child"), 3, worker.output())
        worker.proc.send_signal(signal.SIGTERM)
        self.assertEqual(worker.wait_exit(60), 0, worker.output())
        self.assertNotIn("threads run in the parent before the fork", worker.output())
