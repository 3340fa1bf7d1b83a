"""The django.tasks backend through the framework's public API."""

import time

from django.db import transaction
from django.test import TransactionTestCase
from shop import tasks
from shop.models import Order, Receipt
from sync_worker_django.tasks import DurableWorkflowBackend
from sync_worker_django.testing import DurableWorkflowTestMixin

try:
    from django.tasks import TaskResultStatus, default_task_backend, task_backends
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
except ImportError:
    from django_tasks import TaskResultStatus, default_task_backend, task_backends
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist


def wait_finished(result, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        result.refresh()
        if result.is_finished or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


class TasksBackendTests(DurableWorkflowTestMixin, TransactionTestCase):
    def test_backend_is_configured_and_says_what_it_supports(self):
        backend = task_backends["default"]
        self.assertIsInstance(backend, DurableWorkflowBackend)
        self.assertEqual(default_task_backend.alias, "default")
        self.assertEqual((backend.supports_defer, backend.supports_priority, backend.supports_get_result,
                          backend.supports_async_task), (False, False, True, False))

    def test_enqueue_runs_the_task_on_the_worker_and_reports_the_result(self):
        self.start_durable_workers(["shop"])
        order = Order.objects.create(customer="task")
        result = tasks.write_receipt.enqueue(order.pk, "thanks")
        self.assertEqual(result.status, TaskResultStatus.READY)
        wait_finished(result)
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL)
        receipt = Receipt.objects.get(order=order)
        self.assertEqual(result.return_value, {"receipt": receipt.pk, "order": order.pk})
        self.assertEqual((result.args, result.kwargs), ([order.pk, "thanks"], {}))
        self.assertEqual(result.attempts, 1)
        self.assertEqual(len(result.worker_ids), 1)
        self.assertTrue(result.worker_ids[0].startswith("sync-worker-"))
        self.assertTrue(result.enqueued_at <= result.started_at <= result.finished_at)
        fetched = tasks.write_receipt.get_result(result.id)
        self.assertEqual((fetched.status, fetched.return_value), (TaskResultStatus.SUCCESSFUL, result.return_value))

    def test_failure_reports_errors_with_class_path_and_traceback(self):
        self.start_durable_workers(["shop"])
        result = wait_finished(tasks.always_fails.enqueue(7))
        self.assertEqual(result.status, TaskResultStatus.FAILED)
        self.assertEqual(len(result.errors), 1)
        error = result.errors[0]
        self.assertEqual(error.exception_class_path, "builtins.ValueError")
        self.assertIs(error.exception_class, ValueError)
        self.assertIn("order 7 cannot be receipted", error.traceback)
        self.assertIn("Traceback", error.traceback)
        with self.assertRaises(ValueError):
            result.return_value  # noqa: B018

    def test_takes_context_tasks_get_their_attempt_number(self):
        self.assertEqual(task_backends["retrying"].retry_policy["max_attempts"], 3)  # OPTIONS are read
        self.start_durable_workers(["shop"])
        order = Order.objects.create(customer="flaky")
        result = wait_finished(tasks.flaky_receipt.enqueue(order.pk))
        self.assertEqual(result.status, TaskResultStatus.SUCCESSFUL, result.errors)
        self.assertEqual(result.return_value, 2)
        self.assertEqual(result.attempts, 2)
        self.assertEqual(Receipt.objects.get(order=order).attempt, 2)
        self.assertEqual(len(result.errors), 1)
        self.assertIn("mail server is down", result.errors[0].traceback)

    def test_status_while_running(self):
        order = Order.objects.create(customer="pending")
        result = tasks.write_receipt.enqueue(order.pk, "later")
        result.refresh()
        self.assertEqual(result.status, TaskResultStatus.READY)
        self.assertFalse(result.is_finished)
        with self.assertRaises(ValueError):
            result.return_value  # noqa: B018

    def test_enqueue_inside_atomic_waits_for_the_commit(self):
        with self.assertRaises(RuntimeError), transaction.atomic():
            dropped = tasks.write_receipt.enqueue(1, "never")
            raise RuntimeError("roll back")
        with self.assertRaises(TaskResultDoesNotExist):
            task_backends["default"].get_result(dropped.id)

    def test_unsupported_options_are_refused_with_the_frameworks_invalid_task(self):
        import datetime

        from django.utils import timezone

        with self.assertRaises(InvalidTask):
            tasks.write_receipt.using(priority=10)
        with self.assertRaises(InvalidTask):
            tasks.write_receipt.using(run_after=timezone.now() + datetime.timedelta(minutes=5))
        with self.assertRaises(InvalidTask):
            tasks.write_receipt.using(queue_name="not-configured")

    def test_django_values_are_refused_before_sending(self):
        order = Order.objects.create(customer="model")
        with self.assertRaises(TypeError) as raised:
            tasks.write_receipt.enqueue(order, "x")
        self.assertIn("primary key", str(raised.exception))

    def test_a_using_copy_on_another_queue_does_not_take_the_task_off_its_queue(self):
        from sync_worker_django.task_registry import tasks_for_queue

        moved = tasks.write_receipt.using(queue_name="inventory")
        self.assertEqual(moved.queue_name, "inventory")
        self.assertIn("shop.tasks.write_receipt", [t.module_path for t in tasks_for_queue("shop")])
        self.assertIn("shop.tasks.write_receipt", [t.module_path for t in tasks_for_queue("inventory")])

    def test_unknown_result_id(self):
        with self.assertRaises(TaskResultDoesNotExist):
            task_backends["default"].get_result("task-does-not-exist")
