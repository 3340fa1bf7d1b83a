"""``bench/prefork_cpu.py --celery``, our side (sync_worker_celery: only the import differs)."""

import os
import time

from sync_worker_celery import Celery

app = Celery("bench", broker=os.environ.get("BENCH_REDIS_URL"), backend=os.environ.get("BENCH_REDIS_URL"))
app.conf.task_default_queue = "bench"
app.conf.worker_prefetch_multiplier = 1


@app.task(name="bench.spin")
def spin(iterations):
    total = 0
    for number in range(iterations):
        total += number * number % 7
    return time.time()  # when it finished: the bench's end of the window
