"""Workflows of the project run end to end: ORM reads and writes from both apps, DB hygiene, bad values."""

import os
import threading

from django.db import connection
from django.test import TransactionTestCase
from inventory.models import Reservation, StockItem
from shop.models import Order
from sync_worker_django import DjangoValueNotAllowed, build_workers
from sync_worker_django.db import close_slot_connections, task_scope
from sync_worker_django.runner import gevent_patched
from sync_worker_django.testing import DurableWorkflowTestMixin

from sync_worker import WorkflowFailed

from ._support import open_worker_connections


class WorkflowTests(DurableWorkflowTestMixin, TransactionTestCase):
    def test_order_workflow_reads_and_writes_rows_of_both_apps(self):
        StockItem.objects.create(sku="widget", quantity=10)
        orders = [Order.objects.create(customer=f"c{i}", sku="widget", quantity=2) for i in range(3)]
        self.start_durable_workers()
        handles = [self.durable_client.start_workflow("shop.fulfil_order", o.pk, task_queue="shop") for o in orders]
        results = [h.result(timeout=60) for h in handles]
        self.assertEqual(sorted(r["left"] for r in results), [4, 6, 8])
        self.assertEqual(set(Order.objects.values_list("status", flat=True)), {"fulfilled"})
        self.assertEqual(Reservation.objects.count(), 3)
        self.assertEqual(StockItem.objects.get(sku="widget").quantity, 4)

    def test_one_worker_per_task_queue_each_polling_its_queue(self):
        workers = self.start_durable_workers()
        self.assertEqual(sorted(w.task_queue for w in workers), ["inventory", "shop"])
        StockItem.objects.create(sku="bolt", quantity=1)
        order = Order.objects.create(customer="inv", sku="bolt", quantity=1)
        result = self.run_workflow("shop.fulfil_order", order.pk, task_queue="inventory", timeout=60)
        self.assertEqual(result["left"], 0)

    def test_a_decimal_result_fails_the_attempt_at_once_non_retryable(self):
        order = Order.objects.create(customer="d", total="12.50")
        self.start_durable_workers(["shop"])
        handle = self.durable_client.start_workflow("shop.total_as_is", order.pk, task_queue="shop")
        with self.assertRaises(WorkflowFailed) as raised:
            handle.result(timeout=30)
        message = str(raised.exception) + str(getattr(raised.exception, "__dict__", ""))
        history = self.durable_client.get_history(handle.workflow_id, handle.describe().run_id)["events"]
        failed = [e for e in history if e["event_type"] == "ActivityFailed"]
        self.assertEqual(len(failed), 1, message)
        self.assertEqual(failed[0]["payload"]["attempt_number"], 1)  # not retried although the policy allows 5
        self.assertTrue(failed[0]["payload"]["non_retryable"])
        self.assertIn("Decimal", failed[0]["payload"]["message"])
        self.assertIn("str(value)", failed[0]["payload"]["message"])
        self.assertNotIn("ActivityRetryScheduled", [e["event_type"] for e in history])

    def test_model_instance_datetime_and_decimal_arguments_are_refused_before_sending(self):
        import datetime
        import decimal

        order = Order.objects.create(customer="m")
        client = self.durable_client
        before = len(client.list_workflows().workflows)
        cases = [
            ((order,), "$[0]", "primary key"),
            (({"order": {"when": datetime.datetime(2026, 1, 1)}},), "$[0].order.when", "isoformat"),
            ((1, [decimal.Decimal("1.10")]), "$[1][0]", "str(value)"),
        ]
        for args, path, hint in cases:
            with self.subTest(path=path):
                with self.assertRaises(DjangoValueNotAllowed) as raised:
                    client.start_workflow("shop.fulfil_order", *args, task_queue="shop")
                self.assertEqual(raised.exception.path, path)
                self.assertIn(hint, str(raised.exception))
        with self.assertRaises(DjangoValueNotAllowed) as raised:
            client.start_workflow("shop.fulfil_order", 1, task_queue="shop",
                                  memo={"placed": datetime.date(2026, 1, 1)})
        self.assertIn("memo $.placed is a date", str(raised.exception))
        with self.assertRaises(DjangoValueNotAllowed):
            client.signal_workflow("wf-any", "approve", args=[order])
        self.assertEqual(len(client.list_workflows().workflows), before)  # nothing reached the server

    def test_slots_close_their_connections_and_later_tasks_get_fresh_ones(self):
        self.start_durable_workers(["shop"])
        states = [self.durable_client.start_activity("shop.connection_state", task_queue="shop")
                  for _ in range(4)]
        results = [self.durable_client.get_activity_result(s["activity_id"], timeout=30) for s in states]
        self.assertEqual([r["open_at_start"] for r in results], [False] * 4)
        self.assertEqual(open_worker_connections(settle=5.0), 0)

    def test_hygiene_leaves_a_connection_inside_atomic_alone(self):
        from django.db import transaction

        errors = []

        def in_thread():
            try:
                with transaction.atomic():
                    Order.objects.create(customer="atomic")
                    with task_scope():
                        Order.objects.count()
                    self_closed = close_slot_connections()
                    assert self_closed == 0, self_closed
                    assert connection.connection is not None
                    Order.objects.count()  # still usable: nothing was closed under the transaction
            except BaseException as error:
                errors.append(error)
            finally:
                connection.close()

        thread = threading.Thread(target=in_thread)
        thread.start()
        thread.join(30)
        self.assertEqual(errors, [])
        self.assertEqual(Order.objects.filter(customer="atomic").count(), 1)

    def test_workers_run_on_the_pool_of_this_process(self):
        expected = "gevent" if gevent_patched() else "threads"
        self.assertEqual(os.environ.get("SYNC_WORKER_POOL", "threads"), expected)
        workers = self.start_durable_workers()
        self.assertEqual({w.pool for w in workers}, {expected})
        if expected == "gevent":  # psycopg 3 picks its gevent-aware wait function in a patched process
            from gevent import monkey

            self.assertTrue(monkey.is_module_patched("socket"))
        StockItem.objects.create(sku="pool", quantity=5)
        order = Order.objects.create(customer="pool", sku="pool", quantity=1)
        self.assertEqual(self.run_workflow("shop.fulfil_order", order.pk, task_queue="shop")["left"], 4)

    def test_per_plane_tokens_reach_each_plane(self):
        from django.conf import settings
        from django.test import override_settings
        from sync_worker_django.testing import DurableTestEnvironment
        from sync_worker_django.workers import build_client

        from sync_worker import Unauthorized

        tokens = {"CONTROL_TOKEN": "control-secret", "WORKER_TOKEN": "worker-secret"}
        with override_settings(SYNC_WORKER={**settings.SYNC_WORKER, **tokens}):
            environment = DurableTestEnvironment().start()
            try:
                environment.start_workers(["shop"])
                order = Order.objects.create(customer="tokens")
                self.assertIn("touched", environment.run_workflow("shop.slow_touch", order.pk, 0.1, task_queue="shop"))
                with override_settings(SYNC_WORKER={**settings.SYNC_WORKER, "CONTROL_TOKEN": "wrong"}), \
                        self.assertRaises(Unauthorized):
                    build_client().start_workflow("shop.slow_touch", order.pk, 0.1, task_queue="shop")
            finally:
                environment.stop()

    def test_query_log_is_reset_per_task_under_debug(self):
        from django.test import override_settings

        seen = []

        def in_thread():
            try:
                Order.objects.count()
                seen.append(len(connection.queries))
                with task_scope():
                    seen.append(len(connection.queries))
            finally:
                connection.close()

        with override_settings(DEBUG=True):
            thread = threading.Thread(target=in_thread)
            thread.start()
            thread.join(30)
        self.assertEqual(seen, [1, 0])

    def test_build_workers_is_the_public_factory(self):
        workers = build_workers(task_queues=["inventory"], concurrency=3)
        self.assertEqual([(w.task_queue, w.max_concurrent_activity_tasks) for w in workers], [("inventory", 3)])
        self.assertIn("inventory.reserve", workers[0].activities)
        self.assertIn("shop.fulfil_order", workers[0].workflows.names())

    def test_pollers_and_the_sticky_cache_come_from_the_settings_and_the_flags(self):
        from django.conf import settings
        from django.test import override_settings

        configured = {**settings.SYNC_WORKER, "ACTIVITY_POLLERS": 3, "STICKY_CACHE_CAPACITY": 200}
        with override_settings(SYNC_WORKER=configured):
            worker = build_workers(task_queues=["inventory"])[0]
            self.assertEqual((worker.max_concurrent_activity_task_polls, worker.max_concurrent_workflow_task_polls),
                             (3, 1))
            self.assertEqual(worker.sticky_cache.capacity, 200)
            flagged = build_workers(task_queues=["inventory"], overrides={"WORKFLOW_POLLERS": 2})[0]
            self.assertEqual(flagged.max_concurrent_workflow_task_polls, 2)


class TimeSkippingTests(DurableWorkflowTestMixin, TransactionTestCase):
    """The mixin on sync_worker.testing's virtual clock: three days pass in milliseconds."""

    durable_time_skipping = True

    def test_a_three_day_timer_then_an_orm_write(self):
        order = Order.objects.create(customer="late payer")
        self.start_durable_workers(["shop"])
        before = self.durable.time()
        result = self.run_workflow("shop.remind_unpaid", order.pk, task_queue="shop", timeout=30,
                                   execution_timeout_seconds=30 * 86400, run_timeout_seconds=30 * 86400)
        self.assertEqual(result, {"order": order.pk, "status": "reminded"})
        self.assertEqual(Order.objects.get(pk=order.pk).status, "reminded")
        self.assertGreaterEqual(self.durable.time() - before, 3 * 86400)
        self.assertLess(self.durable.time() - before, 3 * 86400 + 60)

    def test_sleep_moves_the_clock_for_a_workflow_started_through_the_django_client(self):
        order = Order.objects.create(customer="sleeper")
        self.start_durable_workers(["shop"])
        handle = self.durable_client.start_workflow("shop.remind_unpaid", order.pk, task_queue="shop",
                                                    execution_timeout_seconds=30 * 86400,
                                                    run_timeout_seconds=30 * 86400)
        self.durable.sleep(2 * 86400)
        self.assertEqual(Order.objects.get(pk=order.pk).status, "new")
        self.durable.sleep(86400 + 60)  # the timer started when the first task ran, just after the start
        self.assertEqual(Order.objects.get(pk=order.pk).status, "reminded")
        self.assertEqual(handle.describe().status, "completed")
