"""Autodiscovery of both apps' modules, and the duplicate-name refusal naming both modules."""

from django.test import SimpleTestCase, override_settings
from sync_worker_django.discovery import DuplicateTypeName, autodiscover
from sync_worker_django.task_registry import registered_tasks


class DiscoveryTests(SimpleTestCase):
    def test_finds_workflows_activities_and_tasks_of_every_app(self):
        found = autodiscover(("workflows", "activities", "tasks"))
        self.assertEqual(found.workflows["shop.fulfil_order"][1], "shop.workflows")
        self.assertEqual(found.activities["inventory.reserve"][1], "inventory.activities")
        self.assertEqual(found.activities["shop.mark_status"][1], "shop.activities")
        self.assertIn("shop.tasks", found.modules)
        self.assertIn("shop.tasks.write_receipt", registered_tasks())
        self.assertNotIn("sync_worker_django.workflows", found.modules)  # apps without the module are skipped

    def test_module_names_are_configurable(self):
        found = autodiscover(("workflows",))
        self.assertEqual(set(found.activities), set())
        self.assertIn("shop.slow_touch", found.workflows)

    def test_duplicate_type_name_is_refused_naming_both_modules(self):
        apps = ["django.contrib.contenttypes", "sync_worker_django", "shop", "inventory", "dupapp"]
        with override_settings(INSTALLED_APPS=apps), self.assertRaises(DuplicateTypeName) as raised:
            autodiscover(("workflows", "activities"))
        message = str(raised.exception)
        self.assertIn("shop.load_order", message)
        self.assertIn("shop.activities", message)
        self.assertIn("dupapp.activities", message)

    def test_app_ready_does_not_import_worker_modules(self):
        import subprocess
        import sys

        code = ("import django, sys; django.setup(); print(sorted(m for m in sys.modules "
                "if m.split('.')[0] in ('shop', 'inventory') and m.endswith(('.workflows', '.activities', '.tasks'))))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
        self.assertEqual(out.stdout.strip(), "[]")
