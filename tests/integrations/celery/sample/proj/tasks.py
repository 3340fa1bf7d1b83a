"""Celery-era tasks of the sample project (written for Celery 5)."""

import time

from sync_worker_celery import shared_task
from sync_worker_celery.exceptions import SoftTimeLimitExceeded
from sync_worker_celery.utils.log import get_task_logger

from .celery import app

logger = get_task_logger(__name__)


class UpstreamError(Exception):
    """A flaky dependency."""


def _pause(seconds):
    # short sleeps, so a time limit raised in this thread lands promptly
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)


@app.task
def add(x, y):
    return x + y


@app.task
def tsum(numbers):
    return sum(numbers)


@shared_task
def greet(name, greeting="hello", punctuation="!"):
    logger.info("greeting %s", name)
    return f"{greeting}, {name}{punctuation}"


@app.task
def route_me(value):
    return value


@app.task(bind=True, max_retries=3, default_retry_delay=30)
def flaky(self, succeed_on_attempt):
    if self.request.retries + 1 < succeed_on_attempt:
        raise self.retry(exc=UpstreamError("upstream down"), countdown=1)
    return {"attempt": self.request.retries + 1, "id": self.request.id}


@app.task(bind=True, max_retries=1)
def retry_forever(self):
    raise self.retry(countdown=0)


@app.task(bind=True, autoretry_for=(UpstreamError,), retry_backoff=1, retry_backoff_max=2,
          retry_jitter=False, max_retries=3)
def autoretried(self, failures):
    if self.request.retries < failures:
        raise UpstreamError(f"failure {self.request.retries + 1}")
    return self.request.retries


@app.task(soft_time_limit=1, time_limit=20)
def soft_limited(seconds):
    try:
        _pause(seconds)
    except SoftTimeLimitExceeded:
        return "cleaned up after the soft limit"
    return "finished"


@app.task(time_limit=1)
def hard_limited(seconds):
    _pause(seconds)
    return "finished"


@app.task(bind=True)
def with_progress(self, steps, pause):
    for step in range(steps):
        self.update_state(state="PROGRESS", meta={"current": step + 1, "total": steps})
        _pause(pause)
    return {"done": steps}


@app.task
def sleepy(seconds):
    _pause(seconds)
    return seconds


@app.task
def explode(message):
    raise ValueError(message)


@app.task(rate_limit="4/s")
def limited(index):
    return index


ERRBACKS = []


@app.task
def remember_failure(request, exc, traceback, note):
    """A new-style errback (Celery calls it with the failed call's request, exception and traceback)."""
    ERRBACKS.append((request.id, note, exc))
    return request.id


CALLBACKS = []


@app.task
def note(*args):
    """Records its arguments (a callback's; as an errback, new style: request, exc, traceback first)."""
    CALLBACKS.append(args)
    return [getattr(a, "id", None) if hasattr(a, "id") else repr(a) if isinstance(a, Exception) else a
            for a in args]


@app.task
def note_old_style(task_id):
    """An old-style errback (one argument: the failed task's id)."""
    CALLBACKS.append((task_id, "old-style"))
    return task_id


@app.task(bind=True)
def add_replaced(self, x, y):
    raise self.replace(add.s(x, y))


@app.task(bind=True)
def replaced_by_canvas(self, x, fail=False):
    from sync_worker_celery import chain, group

    last = explode.si("replaced boom") if fail else tsum.s()
    return self.replace(chain(group(add.s(x, 1), add.s(x, 2)), last))


@app.task(bind=True)
def request_view(self):
    """What the task sees of its call: message properties and replacement nesting."""
    return {"properties": self.request.properties, "replaced_task_nesting": self.request.replaced_task_nesting}


@app.task(bind=True)
def nested_replace(self, depth):
    """Replaces itself ``depth`` times; the last one returns how deep it runs."""
    if depth:
        raise self.replace(nested_replace.si(depth - 1))
    return self.request.replaced_task_nesting


@app.task(bind=True)
def request_ids(self, label):
    """``[root_id, parent_id, label]`` of the call (canvas ids, as Celery's integration suite checks them)."""
    return [self.request.root_id, self.request.parent_id, label]


class TwoArgError(Exception):
    """An error raised with two arguments."""


@app.task
def explode_with_two(first, second):
    raise TwoArgError(first, second)


@app.task(bind=True)
def call_children(self):
    """A child applied eagerly and one published from inside this task (their ids say whose they are)."""
    return {"applied": request_ids.apply(("applied",)).get(), "published": request_ids.delay("published").id}


@app.task
def start_a_chain():
    """Starts a chain and returns its result object (stored as Celery stores one: its tuple)."""
    from sync_worker_celery import chain, group

    return chain(add.s(1, 1), group(add.s(2), add.s(3)), tsum.s()).apply_async()


@app.task(bind=True)
def stamps_view(self, *args):
    """The call's stamps (canvas stamping): ``[stamped_headers, stamps]``."""
    return [sorted(self.request.stamped_headers or []), self.request.stamps]
