"""Settings of the Django-flavoured Celery sample (Celery settings under the CELERY_ namespace)."""

import os

SECRET_KEY = "celery-sample-not-secret"
DEBUG = False
INSTALLED_APPS = ["django.contrib.contenttypes", "shop"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",
                         "NAME": os.environ.get("CELERY_DJSAMPLE_DB", ":memory:")}}
USE_TZ = True
SHOP_NAME = "the sample shop"

CELERY_BROKER_URL = "redis://localhost:6379/0"
CELERY_TASK_DEFAULT_QUEUE = "dj-default"
CELERY_TASK_ROUTES = {"shop.tasks.shop_name": {"queue": "dj-names"}}
