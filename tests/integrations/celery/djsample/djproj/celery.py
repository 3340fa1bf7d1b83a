"""The Django project's Celery app, the pattern of Celery's "First steps with Django"."""

import os

from sync_worker_celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djproj.settings")

app = Celery("djproj")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.task(bind=True, ignore_result=True)
def debug_task(self):
    return f"Request: {self.request.id}"
