"""Settings of the example shop. SQLite by default; ``SHOP_DB_NAME``/``SHOP_PG_DSN`` pick others."""

import os
from pathlib import Path
from urllib.parse import urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = "example-only-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
ROOT_URLCONF = "shopsite.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "sync_worker_django",  # durable_worker, durable_devserver, health views, checks
    "orders",
]

if os.environ.get("SHOP_PG_DSN"):  # e.g. postgresql://postgres@127.0.0.1:5432/shop
    dsn = urlsplit(os.environ["SHOP_PG_DSN"])
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.postgresql", "NAME": dsn.path.lstrip("/") or "shop",
        "USER": dsn.username or "postgres", "PASSWORD": dsn.password or "", "HOST": dsn.hostname or "127.0.0.1",
        "PORT": str(dsn.port or 5432),
    }}
else:
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_DB_NAME", str(BASE_DIR / "shop.sqlite3")),
        "OPTIONS": {"timeout": 20},
    }}

# One dict configures the worker side; DURABLE_WORKFLOW_SERVER_URL / _AUTH_TOKEN / _NAMESPACE
# in the environment override it, durable_worker's flags override both.
SYNC_WORKER = {
    "SERVER_URL": "http://127.0.0.1:7233",
    "TASK_QUEUES": ["orders"],
    "CONCURRENCY": 20,
    "SHUTDOWN_TIMEOUT": 30,
}

# django.tasks (Django 6) or the django-tasks backport: tasks become durable activities.
TASKS = {"default": {"BACKEND": "sync_worker_django.tasks.DurableWorkflowBackend", "QUEUES": ["orders"]}}
