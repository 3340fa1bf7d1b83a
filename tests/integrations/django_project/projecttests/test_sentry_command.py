"""Sentry with ``manage.py durable_worker``: a project whose settings run ``sentry_sdk.init(...)``
with Sentry's Django integration (no sync_worker integration named) gets one event per failed
activity from the worker process, with its tags. The worker is a real process; its Sentry SDK sends
to a local ingest endpoint over a real socket. Not tagged ``process``: it runs on the SQLite leg too."""

import os
import time
from unittest import mock

from django.test import TransactionTestCase
from shop.models import Order
from sync_worker_django.testing import DurableWorkflowTestMixin

from ._sentry_ingest import SentryIngest
from .test_command_process import WorkerProcess


class SentryCommandTests(DurableWorkflowTestMixin, TransactionTestCase):
    def test_a_failed_activity_is_one_event_with_its_tags(self):
        with SentryIngest() as ingest:
            with mock.patch.dict(os.environ, {"SW_DJANGO_SENTRY_DSN": ingest.dsn}):
                worker = WorkerProcess(self.durable.server.url, "-Q", "shop", "-P", "threads")
            self.addCleanup(worker.kill)
            worker.wait_ready()
            missing = self.durable_client.start_activity("shop.mark_status", 987654, "paid", task_queue="shop",
                                                         retry_policy={"max_attempts": 2, "backoff_seconds": [0]})
            order = Order.objects.create(customer="sentry")
            fine = self.durable_client.start_activity("shop.mark_status", order.pk, "paid", task_queue="shop")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not ingest.events:
                time.sleep(0.1)
            time.sleep(1.0)  # a second attempt's event, were there one, would have arrived by now
            worker.proc.terminate()
            worker.wait_exit(60)
            events = list(ingest.events)
        self.assertEqual(len(events), 1, [e.get("tags") for e in events])
        [event] = events
        tags = event["tags"]
        self.assertEqual((tags["activity.type"], tags["activity.attempt"], tags["task_queue"]),
                         ("shop.mark_status", "2", "shop"))
        self.assertEqual(event["exception"]["values"][-1]["type"], "LookupError")
        self.assertIn("987654", event["exception"]["values"][-1]["value"])
        self.assertEqual(tags["workflow.id"], missing.activity_id)  # a standalone activity's workflow id is its own
        self.assertEqual(fine.result(timeout=10), "paid")  # a success is no event
