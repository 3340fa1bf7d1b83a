"""The sample project's Celery app (written for Celery 5)."""

import os

from sync_worker_celery import Celery
from sync_worker_celery.schedules import crontab
from sync_worker_celery.signals import worker_init, worker_process_init, worker_process_shutdown, worker_shutdown

app = Celery("proj", broker="redis://localhost:6379/0", backend="redis://localhost:6379/1")
app.conf.update(
    task_default_queue="proj-default",
    task_routes={"proj.tasks.route_me": {"queue": "proj-routed"}},
)
app.conf.beat_schedule = {
    "add-every-second": {"task": "proj.tasks.add", "schedule": 1.0, "args": (16, 16)},
    "nightly-greeting": {"task": "proj.tasks.greet", "schedule": crontab(minute=30, hour=2), "args": ("ops",),
                         "kwargs": {"greeting": "good night"}},
}
app.autodiscover_tasks(["proj"])


# The worker signals a project hooks (as with celery.signals); the process tests read this log.


def _note(name):
    def receiver(**kwargs):
        path = os.environ.get("PROJ_SIGNAL_LOG")
        if path:
            with open(path, "a") as log:
                log.write(f"{name} {os.getpid()}\n")
    return receiver


for _signal in (worker_init, worker_process_init, worker_process_shutdown, worker_shutdown):
    _signal.connect(_note(_signal.name), weak=False)
