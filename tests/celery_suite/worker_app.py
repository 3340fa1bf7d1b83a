"""The app the suite's ``sync-worker celery`` process serves: Celery's ``t.integration.tasks``
(shared tasks) plus the class-based task that Celery's suite registers through its
``celery_class_tasks`` fixture. Staged as ``t/integration/_worker_app.py``."""

from sync_worker_celery import Celery

app = Celery("celery_suite", include=["t.integration.tasks"])
app.conf.update(result_extended=True)


@app.on_after_finalize.connect
def _register_class_tasks(sender, **kwargs):
    from t.integration.tasks import ClassBasedAutoRetryTask

    sender.register_task(ClassBasedAutoRetryTask)
