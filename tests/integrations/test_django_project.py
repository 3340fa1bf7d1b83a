"""The Django test project's own suite (``manage.py test projecttests``), against SQLite and PostgreSQL.

``tests/integrations/django_project`` is a real Django project (two apps with models and
migrations, ORM-using workflows, activities and ``django.tasks`` tasks); its tests use
``sync_worker_django.testing`` and run the workers for real against the dev server. Each
database is one subprocess (Django is configured once per process); its output is shown
on failure. ``SW_DJANGO_LEG`` keeps the databases of concurrent legs apart.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from tests._sdk_missing import DJANGO_TASKS_MISSING, DJANGO_TASKS_UNAVAILABLE

PROJECT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "django_project")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

if DJANGO_TASKS_UNAVAILABLE:
    pytest.skip(DJANGO_TASKS_MISSING, allow_module_level=True)
pytest.importorskip("django", reason="Django is not installed: pip install -e '.[dev]' installs it")


def project_env(db: str, leg: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    paths = [ROOT, os.path.join(ROOT, "integrations", "django"), PROJECT]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env.update({"PYTHONPATH": os.pathsep.join(paths), "SW_DJANGO_DB": db, "SW_DJANGO_LEG": leg,
                "DJANGO_SETTINGS_MODULE": "djsite.settings"})
    env.setdefault("SW_DJANGO_DATA_DIR", tempfile.mkdtemp(prefix="sw-django-"))
    env.update(extra)
    return env


def run_project_suite(db: str, leg: str, labels: list[str], timeout: float = 600, **extra: str) -> None:
    env = project_env(db, leg, **extra)
    command = [sys.executable, "manage.py", "test", *labels, "--noinput", "-v", "2"]
    done = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"manage.py test failed ({db}):\n{output[-20000:]}"
    assert "Ran " in output and " OK" in output, output[-5000:]


def test_project_suite_on_sqlite() -> None:
    # The real-process tests (tag "process") run on PostgreSQL below and on SQLite in the Django 6 leg.
    run_project_suite("sqlite", f"main{os.getpid()}", ["projecttests", "--exclude-tag", "process"])


def test_pytest_fixtures_on_sqlite() -> None:
    """The pytest fixtures of sync_worker_django.testing, in a pytest process of their own."""
    env = project_env("sqlite", f"pytest{os.getpid()}", SW_DJANGO_PYTEST="1")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(PROJECT, "pytests")]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-10000:] + done.stderr[-5000:]
    assert "2 passed" in done.stdout, done.stdout[-3000:]


def test_project_suite_on_postgresql() -> None:
    if not os.environ.get("SYNC_WORKER_TEST_PG_DSN"):
        pytest.skip("PostgreSQL is not running: start it with `eval \"$(scripts/services.sh)\"` (scripts/test does)")
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed: pip install -e '.[dev]' installs it")
    run_project_suite("postgres", f"main{os.getpid()}", ["projecttests"])
