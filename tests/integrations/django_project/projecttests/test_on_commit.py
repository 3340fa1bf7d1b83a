"""start_workflow_on_commit / start_activity_on_commit: after commit, never on rollback."""

from django.db import transaction
from django.test import TransactionTestCase
from shop.models import Order
from sync_worker_django import DjangoValueNotAllowed, start_activity_on_commit, start_workflow_on_commit
from sync_worker_django.testing import DurableWorkflowTestMixin

from sync_worker import WorkflowNotFound


class OnCommitTests(DurableWorkflowTestMixin, TransactionTestCase):
    def exists(self, workflow_id):
        try:
            self.durable_client.describe_workflow(workflow_id)
            return True
        except WorkflowNotFound:
            return False

    def test_start_waits_for_the_commit_and_sees_the_row(self):
        self.start_durable_workers(["shop"])
        started = []
        with transaction.atomic():
            order = Order.objects.create(customer="commit", status="new")
            workflow_id = start_workflow_on_commit("shop.slow_touch", order.pk, 0.1, task_queue="shop",
                                                   on_started=started.append)
            Order.objects.filter(pk=order.pk).update(workflow_id=workflow_id)
            self.assertFalse(self.exists(workflow_id))  # not sent while the transaction is open
            self.assertEqual(started, [])
        self.assertTrue(self.exists(workflow_id))
        self.assertEqual(started[0].workflow_id, workflow_id)
        started[0].result(timeout=30)
        order.refresh_from_db()
        self.assertEqual((order.status, order.workflow_id), ("touched", workflow_id))

    def test_rollback_never_starts_anything(self):
        with self.assertRaises(RuntimeError), transaction.atomic():
            order = Order.objects.create(customer="rollback")
            workflow_id = start_workflow_on_commit("shop.fulfil_order", order.pk, task_queue="shop")
            activity_id = start_activity_on_commit("shop.mark_status", order.pk, "x", task_queue="shop")
            raise RuntimeError("roll back")
        self.assertFalse(self.exists(workflow_id))
        self.assertFalse(self.exists(activity_id))
        self.assertFalse(Order.objects.filter(customer="rollback").exists())

    def test_inner_savepoint_rollback_drops_only_its_own_start(self):
        with transaction.atomic():
            kept = start_workflow_on_commit("shop.fulfil_order", 1, task_queue="shop")
            try:
                with transaction.atomic():
                    dropped = start_workflow_on_commit("shop.fulfil_order", 2, task_queue="shop")
                    raise ValueError("inner")
            except ValueError:
                pass
        self.assertTrue(self.exists(kept))
        self.assertFalse(self.exists(dropped))

    def test_standalone_activity_after_commit(self):
        self.start_durable_workers(["shop"])
        with transaction.atomic():
            order = Order.objects.create(customer="activity")
            activity_id = start_activity_on_commit("shop.mark_status", order.pk, "paid", task_queue="shop")
        self.assertEqual(self.durable_client.get_activity_result(activity_id, timeout=30), "paid")
        order.refresh_from_db()
        self.assertEqual(order.status, "paid")

    def test_outside_a_transaction_it_starts_at_once(self):
        workflow_id = start_workflow_on_commit("shop.fulfil_order", 3, task_queue="shop")
        self.assertTrue(self.exists(workflow_id))

    def test_bad_arguments_are_refused_where_the_call_is_made(self):
        order = Order.objects.create(customer="bad")
        with self.assertRaises(DjangoValueNotAllowed) as raised, transaction.atomic():
            start_workflow_on_commit("shop.fulfil_order", order, task_queue="shop")
        self.assertIn("pass the primary key", str(raised.exception))
