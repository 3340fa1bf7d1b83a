"""The sample project's Celery app (written for Celery 5)."""

from sync_worker_celery import Celery

app = Celery("proj", broker="redis://localhost:6379/0", backend="redis://localhost:6379/1")
app.conf.update(
    task_default_queue="proj-default",
    task_routes={"proj.tasks.route_me": {"queue": "proj-routed"}},
)
app.autodiscover_tasks(["proj"])
