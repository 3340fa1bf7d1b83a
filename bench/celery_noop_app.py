"""The bench's Celery 5 app (run by real Celery from its own venv): one no-op task."""

import os
import time

from celery import Celery

app = Celery("bench", broker=os.environ.get("BENCH_REDIS_URL"), backend=os.environ.get("BENCH_REDIS_URL"))
app.conf.task_default_queue = "bench"


@app.task(name="bench.noop")
def noop(sent_at):
    return time.time()
