"""durable/healthz and durable/readyz from the workers running in this process."""

import json

from django.test import TransactionTestCase
from sync_worker_django.testing import DurableWorkflowTestMixin


class HealthViewTests(DurableWorkflowTestMixin, TransactionTestCase):
    def get(self, name):
        response = self.client.get(f"/durable/{name}")
        return response.status_code, json.loads(response.content)

    def test_no_worker_in_this_process_is_503_with_a_reason(self):
        for name in ("healthz", "readyz"):
            code, body = self.get(name)
            self.assertEqual(code, 503)
            self.assertIn("no worker is running", body["reason"])

    def test_running_workers_are_live_and_ready_then_not_ready_once_stopped(self):
        workers = self.start_durable_workers()
        code, body = self.get("healthz")
        self.assertEqual(code, 200, body)
        self.assertEqual(sorted(w["task_queue"] for w in body["workers"]), ["inventory", "shop"])
        code, body = self.get("readyz")
        self.assertEqual((code, body["status"], body["check"]), (200, "ok", "ready"))
        self.assertTrue(all(w["ready"] for w in body["workers"]))
        self.durable.stop_workers()
        code, body = self.get("readyz")
        self.assertEqual(code, 503)
        self.assertFalse(any(w.status().ready for w in workers))

    def test_probes_answer_get_only(self):
        self.assertEqual(self.client.post("/durable/healthz").status_code, 405)
