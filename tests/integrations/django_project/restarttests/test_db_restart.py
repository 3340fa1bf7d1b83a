"""A PostgreSQL restart while the workers run: only the attempts in flight are lost (and retried).

Runs only against a PostgreSQL instance of its own (``tests/integrations/test_django_db_restart.py``
starts one on a free port with its own data directory and passes it in the environment),
never the shared server.
"""

import datetime
import os
import subprocess
import time

from django.db import connection
from django.test import TransactionTestCase
from inventory.models import Reservation, StockItem
from shop.models import Order
from sync_worker_django.testing import DurableWorkflowTestMixin


def restart_postgres():
    data, bin_dir = os.environ["SW_DJANGO_PRIVATE_PG_DATA"], os.environ["SW_DJANGO_PRIVATE_PG_BIN"]
    command = f"'{bin_dir}/pg_ctl' -D '{data}' -m fast -w -t 60 restart >/dev/null"
    if os.geteuid() == 0:
        subprocess.run(["su", "postgres", "-s", "/bin/sh", "-c", command], check=True, timeout=90)
    else:
        subprocess.run(["sh", "-c", command], check=True, timeout=90)


class DatabaseRestartTests(DurableWorkflowTestMixin, TransactionTestCase):
    def history(self, handle):
        return self.durable_client.get_history(handle.workflow_id, handle.describe().run_id)["events"]

    def retries(self, handles):
        return sum(1 for h in handles for e in self.history(h) if e["event_type"] == "ActivityRetryScheduled")

    def failed_attempt_starts(self, handles):
        """When each attempt that failed had been started (the server's ActivityStarted time)."""
        starts = []
        for handle in handles:
            events = self.history(handle)
            started = {e["payload"]["activity_attempt_id"]: parse(e["recorded_at"])
                       for e in events if e["event_type"] == "ActivityStarted"}
            starts += [started[e["payload"]["activity_attempt_id"]]
                       for e in events if e["event_type"] == "ActivityRetryScheduled"]
        return starts

    def test_restart_mid_run_costs_only_the_attempts_in_flight(self):
        self.assertEqual(connection.vendor, "postgresql")
        StockItem.objects.create(sku="widget", quantity=10_000)
        orders = [Order.objects.create(customer=f"r{i}", sku="widget", quantity=2) for i in range(40)]
        workers = self.start_durable_workers(concurrency=8)
        slots = sum(w.max_concurrent_activity_tasks for w in workers)
        client = self.durable_client
        handles = [client.start_workflow("shop.fulfil_order", o.pk, task_queue="shop") for o in orders]
        deadline = time.monotonic() + 60
        while Order.objects.filter(status="fulfilled").count() < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        connection.close()
        began = datetime.datetime.now(datetime.timezone.utc)
        restart_postgres()
        back = datetime.datetime.now(datetime.timezone.utc)
        connection.close()  # this test's own connection was cut by the restart too
        results = [h.result(timeout=120) for h in handles]
        self.assertEqual(sorted(r["status"] for r in results), ["fulfilled"] * 40)
        self.assertEqual(Reservation.objects.count(), 40)
        self.assertEqual(StockItem.objects.get(sku="widget").quantity, 10_000 - 80)

        starts = self.failed_attempt_starts(handles)
        self.assertTrue(starts, "the restart cut no attempt: it did not happen mid-run")
        # Same machine, same clock: an attempt leased before `began` and cut by the restart was running
        # at that moment (at most one per slot); attempts leased during the restart met the outage
        # itself; none leased after the database was back may fail.
        tolerance = datetime.timedelta(seconds=0.2)
        in_flight = [t for t in starts if t < began]
        after = [t for t in starts if t > back + tolerance]
        self.assertLessEqual(len(in_flight), slots, "more attempts failed than slots were running at the restart")
        self.assertEqual(after, [], "an attempt started after the database was back failed: a poisoned connection")

        later = [Order.objects.create(customer=f"after{i}", sku="widget", quantity=1) for i in range(10)]
        after_handles = [client.start_workflow("shop.fulfil_order", o.pk, task_queue="shop") for o in later]
        self.assertEqual([h.result(timeout=60)["status"] for h in after_handles], ["fulfilled"] * 10)
        self.assertEqual(self.retries(after_handles), 0, "a task after the restart met a poisoned connection")


def parse(stamp):
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
