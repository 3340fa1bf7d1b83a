"""On PostgreSQL: a slot waiting on the database never holds up the other slots.

Under gevent this is the proof that psycopg waits on gevent sockets (its C wait function would
block the whole hub: the naps would run one after another). On threads it shows the same of OS
threads. The naps' intervals must overlap; no duration is asserted. Defined only when the
project runs on PostgreSQL (SQLite has no server-side wait).
"""

from django.conf import settings
from django.test import TransactionTestCase
from sync_worker_django.runner import gevent_patched
from sync_worker_django.testing import DurableWorkflowTestMixin

if settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):

    class PostgresWaitTests(DurableWorkflowTestMixin, TransactionTestCase):
        def test_database_waits_of_different_slots_overlap(self):
            if gevent_patched():
                import psycopg.waiting

                self.assertIsNot(psycopg.waiting.wait, getattr(psycopg.waiting, "wait_c", None))
            self.start_durable_workers(["shop"], concurrency=4)
            client = self.durable_client
            started = [client.start_activity("shop.pg_nap", 1.0, task_queue="shop")["activity_id"] for _ in range(4)]
            spans = sorted(client.get_activity_result(a, timeout=60) for a in started)
            overlapping = sum(1 for earlier, later in zip(spans, spans[1:]) if later[0] < earlier[1])
            self.assertGreaterEqual(overlapping, 1, spans)
