"""A tiny Django project served by gunicorn with the embedded worker (no database needed)."""

import os

SECRET_KEY = "sync-worker-embed-test"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "embedsite.urls"
USE_TZ = True
DATABASES: dict = {}
INSTALLED_APPS = ["sync_worker_django", "embedapp"]

SYNC_WORKER = {
    "SERVER_URL": os.environ["EMBED_DJANGO_SERVER_URL"],  # settings, not DURABLE_WORKFLOW_SERVER_URL
    "TASK_QUEUES": [os.environ["EMBED_TEST_QUEUE"], {"NAME": os.environ["EMBED_TEST_QUEUE"] + "-mail",
                                                      "CONCURRENCY": 2}],
    "CONCURRENCY": 3,
    "POLL_TIMEOUT": 5,
    "SHUTDOWN_TIMEOUT": 20,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"sync_worker": {"handlers": ["console"], "level": "INFO"}},
}
