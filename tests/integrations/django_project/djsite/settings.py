"""Settings of the test project. The database comes from the environment:

* ``SW_DJANGO_DB=sqlite`` (default): a SQLite file under ``SW_DJANGO_DATA_DIR`` (a file,
  not memory, so worker threads and ``durable_worker`` subprocesses share it);
* ``SW_DJANGO_DB=postgres``: the server of ``SYNC_WORKER_TEST_PG_DSN``.

``SW_DJANGO_LEG`` names the run (``main``, ``dj6``, ``gevent``...) so legs never share a database;
``SW_DJANGO_RUN`` (set here to the first process's pid when absent, and inherited by the
``durable_worker`` subprocesses a test starts) keeps two concurrent runs of the same leg on one
PostgreSQL server apart too, so one run's teardown never drops the other's test database.
"""

import os
import tempfile
from urllib.parse import urlsplit

LEG = os.environ.get("SW_DJANGO_LEG", "main")
RUN = os.environ.setdefault("SW_DJANGO_RUN", str(os.getpid()))
DB = os.environ.get("SW_DJANGO_DB", "sqlite")
DATA_DIR = os.environ.get("SW_DJANGO_DATA_DIR", tempfile.gettempdir())

SECRET_KEY = "sync-worker-test-project"
DEBUG = os.environ.get("SW_DJANGO_DEBUG") == "1"
USE_TZ = True
ROOT_URLCONF = "djsite.urls"
ALLOWED_HOSTS = ["*"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "sync_worker_django",
    "shop",
    "inventory",
]

if DB == "postgres":
    dsn = urlsplit(os.environ.get("SYNC_WORKER_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:55432/postgres"))
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "postgres",
            "USER": dsn.username or "postgres",
            "PASSWORD": dsn.password or "",
            "HOST": dsn.hostname or "127.0.0.1",
            "PORT": str(dsn.port or 5432),
            "CONN_MAX_AGE": int(os.environ.get("SW_DJANGO_CONN_MAX_AGE", "0")),
            "TEST": {"NAME": f"test_sw_django_{LEG}_{RUN}"},
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.path.join(DATA_DIR, f"sw_django_{LEG}.sqlite3"),
            "OPTIONS": {"timeout": 30},
            "TEST": {"NAME": os.path.join(DATA_DIR, f"test_sw_django_{LEG}.sqlite3")},
        }
    }

if os.environ.get("SW_DJANGO_USE_TEST_DB") == "1":  # a durable_worker subprocess started by a test
    DATABASES["default"]["NAME"] = DATABASES["default"]["TEST"]["NAME"]

SYNC_WORKER = {
    "SERVER_URL": "http://127.0.0.1:7233",
    "TASK_QUEUES": ["shop", "inventory"],
    "CONCURRENCY": 8,
    "SHUTDOWN_TIMEOUT": 15,
    "POLL_TIMEOUT": 10,
}

TASKS = {
    "default": {
        "BACKEND": "sync_worker_django.tasks.DurableWorkflowBackend",
        "QUEUES": ["shop", "inventory"],
    },
    "retrying": {
        "BACKEND": "sync_worker_django.tasks.DurableWorkflowBackend",
        "QUEUES": ["shop"],
        "OPTIONS": {"RETRY_POLICY": {"max_attempts": 3, "backoff_seconds": [0, 0]}, "START_TO_CLOSE_TIMEOUT": 60},
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"sync_worker": {"handlers": ["console"], "level": os.environ.get("SW_DJANGO_LOG", "WARNING")}},
}

if os.environ.get("SW_DJANGO_SENTRY_DSN"):  # Sentry as a Django shop turns it on (projecttests/test_sentry_command.py)
    import sentry_sdk
    from sentry_sdk.integrations.django import DjangoIntegration

    sentry_sdk.init(dsn=os.environ["SW_DJANGO_SENTRY_DSN"], integrations=[DjangoIntegration()])
