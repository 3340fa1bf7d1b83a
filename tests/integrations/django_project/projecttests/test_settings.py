"""SYNC_WORKER settings: lazy reading, precedence (flags > env > settings > defaults), checks with ids."""

from unittest import mock

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.test import SimpleTestCase, override_settings
from sync_worker_django.conf import get_config, problems

BASE = {"SERVER_URL": "http://127.0.0.1:7233", "TASK_QUEUES": ["shop"]}


def ids(found):
    return sorted({check_id for check_id, _, _ in found})


class SettingsTests(SimpleTestCase):
    def test_defaults_and_lazy_reading(self):
        with override_settings(SYNC_WORKER=BASE):
            config = get_config(environ={})
        self.assertEqual(config.server_url, "http://127.0.0.1:7233")
        self.assertEqual([q.name for q in config.task_queues], ["shop"])
        self.assertEqual(config.namespace, "default")
        self.assertEqual(config.task_queues[0].concurrency, 10)
        with override_settings(SYNC_WORKER={**BASE, "NAMESPACE": "billing", "CONCURRENCY": 3}):
            config = get_config(environ={})
        self.assertEqual((config.namespace, config.task_queues[0].concurrency), ("billing", 3))

    def test_environment_overrides_settings_and_flags_override_both(self):
        env = {"DURABLE_WORKFLOW_SERVER_URL": "http://env:1", "DURABLE_WORKFLOW_AUTH_TOKEN": "env-token",
               "DURABLE_WORKFLOW_NAMESPACE": "env-ns"}
        with override_settings(SYNC_WORKER={**BASE, "TOKEN": "settings-token"}):
            config = get_config(environ=env)
            self.assertEqual((config.server_url, config.token, config.namespace),
                             ("http://env:1", "env-token", "env-ns"))
            self.assertEqual(config.sources["TOKEN"], "environment variable DURABLE_WORKFLOW_AUTH_TOKEN")
            config = get_config({"SERVER_URL": "http://flag:2", "NAMESPACE": None}, environ=env)
            self.assertEqual((config.server_url, config.namespace), ("http://flag:2", "env-ns"))

    def test_per_queue_counts_and_queue_selection(self):
        queues = [{"NAME": "shop", "CONCURRENCY": 4}, {"NAME": "inventory", "WORKFLOW_CONCURRENCY": 2}]
        with override_settings(SYNC_WORKER={**BASE, "TASK_QUEUES": queues, "CONCURRENCY": 7}):
            config = get_config(environ={})
            self.assertEqual([(q.name, q.concurrency, q.workflow_concurrency) for q in config.task_queues],
                             [("shop", 4, 10), ("inventory", 7, 2)])
            picked = get_config({"TASK_QUEUES": ["inventory"]}, environ={})
            self.assertEqual([(q.name, q.workflow_concurrency) for q in picked.task_queues], [("inventory", 2)])
            forced = get_config({"CONCURRENCY": 50}, environ={})
            self.assertEqual([q.concurrency for q in forced.task_queues], [50, 50])

    def test_per_plane_tokens(self):
        with override_settings(SYNC_WORKER={**BASE, "CONTROL_TOKEN": "c", "WORKER_TOKEN": "w"}):
            config = get_config(environ={})
        self.assertEqual((config.control_token, config.worker_token), ("c", "w"))

    def test_every_mistake_has_its_check_id(self):
        cases = {
            "sync_worker.E001": ["not a dict"],
            "sync_worker.E002": {**BASE, "CONCURENCY": 3},
            "sync_worker.E003": {"TASK_QUEUES": ["shop"], "SERVER_URL": "ftp://x"},
            "sync_worker.E004": {**BASE, "TOKEN": ""},
            "sync_worker.E005": {**BASE, "NAMESPACE": ""},
            "sync_worker.E006": {**BASE, "TASK_QUEUES": "shop"},
            "sync_worker.E007": {**BASE, "POOL": "eventlet"},
            "sync_worker.E008": {**BASE, "CONCURRENCY": 0},
            "sync_worker.E008 pollers": {**BASE, "ACTIVITY_POLLERS": 0},
            "sync_worker.E008 sticky": {**BASE, "STICKY_CACHE_CAPACITY": -1},
            "sync_worker.E009": {**BASE, "AUTODISCOVER_MODULES": "activities"},
            "sync_worker.E010": {**BASE, "HEALTH_PORT": 70000},
            "sync_worker.E011": {**BASE, "LOG_FORMAT": "xml"},
        }
        for case, value in cases.items():
            check_id = case.split()[0]
            with self.subTest(case), override_settings(SYNC_WORKER=value), \
                    mock.patch.dict("os.environ", {}, clear=False):
                found = problems(environ={})
                self.assertIn(check_id, ids(found))
                with self.assertRaises(ImproperlyConfigured) as raised:
                    get_config(environ={})
                key = next(k for i, k, _ in found if i == check_id)
                self.assertIn(repr(key) if check_id != "sync_worker.E001" else "SYNC_WORKER", str(raised.exception))

    def test_missing_server_url_names_the_key_and_the_env_var(self):
        with override_settings(SYNC_WORKER={"TASK_QUEUES": ["shop"]}), \
                self.assertRaises(ImproperlyConfigured) as raised:
            get_config(environ={})
        self.assertIn("SERVER_URL", str(raised.exception))
        self.assertIn("DURABLE_WORKFLOW_SERVER_URL", str(raised.exception))
        with override_settings(SYNC_WORKER={"TASK_QUEUES": ["shop", "inventory"]}), \
                mock.patch.dict("os.environ", {"DURABLE_WORKFLOW_SERVER_URL": ""}):
            messages = checks.run_checks(tags=["sync_worker"])
        self.assertEqual([(m.id, m.is_serious()) for m in messages], [("sync_worker.W002", False)])

    def test_django_check_framework_reports_the_ids(self):
        with override_settings(SYNC_WORKER={**BASE, "POOL": "eventlet", "TASK_QUEUES": []}), \
                mock.patch.dict("os.environ", {"DURABLE_WORKFLOW_SERVER_URL": ""}):
            messages = checks.run_checks(tags=["sync_worker"])
        found = sorted(m.id for m in messages)
        self.assertEqual(found, ["sync_worker.E006", "sync_worker.E007"])
        self.assertTrue(all(m.is_serious() for m in messages))

    def test_tasks_backend_on_an_unserved_queue_is_a_warning(self):
        tasks = {"default": {"BACKEND": "sync_worker_django.tasks.DurableWorkflowBackend", "QUEUES": ["mail"]}}
        with override_settings(SYNC_WORKER=BASE, TASKS=tasks):
            messages = checks.run_checks(tags=["sync_worker"])
        self.assertEqual([m.id for m in messages], ["sync_worker.W001"])
        self.assertIn("'mail'", messages[0].msg)

    def test_the_project_settings_pass_the_checks(self):
        self.assertEqual(checks.run_checks(tags=["sync_worker"]), [])

    def test_worker_sessions_from_settings_reach_the_worker_options(self):
        with override_settings(SYNC_WORKER={**BASE, "MAX_CONCURRENT_WORKER_SESSIONS": 3}):
            config = get_config(environ={})
        self.assertEqual(config.worker_options(config.task_queues[0]).max_concurrent_worker_sessions, 3)
        with override_settings(SYNC_WORKER=BASE):
            self.assertEqual(get_config(environ={}).max_concurrent_worker_sessions, 10)  # the SDK's default
        with override_settings(SYNC_WORKER={**BASE, "MAX_CONCURRENT_WORKER_SESSIONS": 0}):
            self.assertEqual(ids(problems(environ={})), ["sync_worker.E008"])

    def test_external_storage_from_settings_or_the_environment_reaches_the_client(self):
        import tempfile

        from sync_worker.external_storage import LocalFilesystemExternalStorage

        with tempfile.TemporaryDirectory() as root:
            with override_settings(SYNC_WORKER={**BASE, "EXTERNAL_STORAGE": f"file://{root}",
                                                "EXTERNAL_STORAGE_THRESHOLD_BYTES": 4096}):
                config = get_config(environ={})
            self.assertIsInstance(config.external_storage, LocalFilesystemExternalStorage)
            self.assertEqual(config.external_storage_threshold_bytes, 4096)
            options = config.client_options()
            self.assertIs(options.external_storage, config.external_storage)
            self.assertEqual(options.external_storage_threshold_bytes, 4096)
            client = options.build_client()
            try:
                self.assertIs(client.external_storage, config.external_storage)
                self.assertEqual(client.external_storage_threshold_bytes, 4096)
            finally:
                client.close()
            env = {"SYNC_WORKER_EXTERNAL_STORAGE": root, "SYNC_WORKER_EXTERNAL_STORAGE_THRESHOLD_BYTES": "1024"}
            with override_settings(SYNC_WORKER=BASE):
                config = get_config(environ=env)
            self.assertIsInstance(config.external_storage, LocalFilesystemExternalStorage)
            self.assertEqual(config.external_storage_threshold_bytes, 1024)
            self.assertEqual(config.sources["EXTERNAL_STORAGE"], "environment variable SYNC_WORKER_EXTERNAL_STORAGE")
        with override_settings(SYNC_WORKER={**BASE, "EXTERNAL_STORAGE": "ftp://nowhere",
                                            "EXTERNAL_STORAGE_THRESHOLD_BYTES": 0}):
            self.assertEqual(ids(problems(environ={})), ["sync_worker.E008", "sync_worker.E012"])
            with self.assertRaisesRegex(ImproperlyConfigured, "EXTERNAL_STORAGE"):
                get_config(environ={})
