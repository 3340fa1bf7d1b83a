"""Real Celery 5's app for ``bench/prefork_cpu.py --celery``: one CPU-bound task."""

import os
import time

from celery import Celery

app = Celery("bench", broker=os.environ.get("BENCH_REDIS_URL"), backend=os.environ.get("BENCH_REDIS_URL"))
app.conf.task_default_queue = "bench"
app.conf.worker_prefetch_multiplier = 1  # a CPU-bound queue: no child hoards tasks another could run


@app.task(name="bench.spin")
def spin(iterations):
    total = 0
    for number in range(iterations):
        total += number * number % 7
    return time.time()  # when it finished: the bench's end of the window
