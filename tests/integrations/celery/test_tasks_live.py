"""The sample project's tasks on the dev server over real sockets: delay, kwargs, routing,
retries with countdown, autoretry with backoff, time limits, progress, revoke, failures."""

from __future__ import annotations

import time

import pytest
from sync_worker_celery import signals, states
from sync_worker_celery.exceptions import MaxRetriesExceededError, TaskRevokedError, TimeLimitExceeded
from sync_worker_celery.result import AsyncResult

from ._support import wait_for

pytestmark = pytest.mark.usefixtures("sample_worker")


def test_delay_runs_the_task_as_a_durable_activity(sample_app) -> None:
    from proj.tasks import add

    result = add.delay(2, 3)
    assert result.get(timeout=15) == 5
    assert result.state == states.SUCCESS and result.successful() and result.ready()
    described = sample_app.client.describe_activity(result.id)
    assert described["activity_type"] == "proj.tasks.add"
    assert described["task_queue"] == "proj-default"          # task_default_queue


def test_keyword_arguments_and_shared_task(sample_app) -> None:
    from proj.tasks import greet

    assert greet.delay("ada", punctuation="?").get(timeout=15) == "hello, ada?"
    assert greet.apply_async(("bob",), {"greeting": "hi"}).get(timeout=15) == "hi, bob!"
    assert sample_app.send_task("proj.tasks.greet", args=["cy"], kwargs={"greeting": "yo"}).get(timeout=15) == "yo, cy!"


def test_wrong_arguments_are_refused_before_publishing() -> None:
    from proj.tasks import add

    with pytest.raises(TypeError, match="add"):
        add.delay(1, 2, 3)


def test_task_routes_and_explicit_queue(sample_app) -> None:
    from proj.tasks import route_me

    routed = route_me.delay("x")
    assert routed.get(timeout=15) == "x"
    assert sample_app.client.describe_activity(routed.id)["task_queue"] == "proj-routed"
    explicit = route_me.apply_async(("y",), queue="proj-default", task_id="explicit-id-1")
    assert explicit.id == "explicit-id-1" and explicit.get(timeout=15) == "y"
    assert sample_app.client.describe_activity("explicit-id-1")["task_queue"] == "proj-default"


def test_retry_with_countdown_goes_through_the_server(sample_app) -> None:
    from proj.tasks import flaky

    started = time.monotonic()
    result = flaky.delay(3)
    seen = set()
    while not result.ready():
        seen.add(result.state)
        time.sleep(0.1)
    elapsed = time.monotonic() - started
    assert result.get() == {"attempt": 3, "id": result.id}
    assert states.RETRY in seen
    assert elapsed >= 2.0          # two retries, countdown=1 each, waited by the server
    assert sample_app.client.describe_activity(result.id)["attempt_count"] == 3


def test_states_as_celery_reports_them_without_track_started(sample_app) -> None:
    """Celery's test_retry: the first state after PENDING is RETRY (a running task is not STARTED)."""
    from proj.tasks import flaky, sleepy

    result = flaky.delay(2)
    seen = []
    while not result.ready():
        state = result.state
        if not seen or seen[-1] != state:
            seen.append(state)
        time.sleep(0.05)
    assert result.get() == {"attempt": 2, "id": result.id}
    assert states.STARTED not in seen and states.RETRY in seen, seen
    running = sleepy.delay(3)
    wait_for(lambda: sample_app.client.describe_activity(running.id)["activity_status"] == "running", timeout=15)
    assert running.state == states.PENDING
    sample_app.conf.task_track_started = True
    try:
        assert running.state == states.STARTED
    finally:
        sample_app.conf.task_track_started = False
    assert running.get(timeout=15) is None or running.successful()


def test_retry_past_max_retries_raises_max_retries_exceeded() -> None:
    from proj.tasks import retry_forever

    result = retry_forever.delay()
    with pytest.raises(MaxRetriesExceededError, match=r"Can't retry proj\.tasks\.retry_forever"):
        result.get(timeout=15)
    assert result.state == states.FAILURE
    assert "MaxRetriesExceededError" in (result.traceback or "")


def test_autoretry_with_exponential_backoff(sample_app) -> None:
    from proj.tasks import autoretried

    started = time.monotonic()
    result = autoretried.delay(2)
    assert result.get(timeout=20) == 2
    assert time.monotonic() - started >= 3.0            # backoff 1 s then 2 s
    run_id = sample_app.client.describe_activity(result.id)["workflow_run_id"]
    history = sample_app.client.get_history(result.id, run_id)
    events = history.get("events", history) if isinstance(history, dict) else history
    delays = [e["payload"]["backoff_seconds"] for e in events if e.get("event_type") == "ActivityRetryScheduled"]
    assert delays == [1.0, 2.0]


def test_autoretry_gives_up_with_the_original_error() -> None:
    from proj.tasks import UpstreamError, autoretried

    result = autoretried.delay(10)
    with pytest.raises(UpstreamError, match="failure 4"):
        result.get(timeout=30)


def test_failure_reraises_the_task_exception_type() -> None:
    from proj.tasks import explode

    result = explode.delay("boom")
    with pytest.raises(ValueError, match="boom"):
        result.get(timeout=15)
    assert result.failed() and result.state == states.FAILURE
    assert isinstance(result.result, ValueError)
    assert "raise ValueError(message)" in (result.traceback or "")
    assert result.get(propagate=False).args == ("boom",)


def test_soft_time_limit_is_raised_inside_the_task() -> None:
    from proj.tasks import soft_limited

    assert soft_limited.delay(5).get(timeout=15) == "cleaned up after the soft limit"


def test_hard_time_limit_fails_the_task() -> None:
    from proj.tasks import hard_limited

    result = hard_limited.delay(5)
    with pytest.raises(TimeLimitExceeded):
        result.get(timeout=15)


def test_progress_states_are_readable_while_running() -> None:
    from proj.tasks import with_progress

    result = with_progress.delay(4, 0.4)
    seen = wait_for(lambda: result.state == "PROGRESS" and result.info, timeout=15)
    assert seen["total"] == 4 and 1 <= seen["current"] <= 4
    assert result.get(timeout=15) == {"done": 4}


def test_revoke_before_start_and_while_running(sample_app) -> None:
    from proj.tasks import add, sleepy

    queued = add.apply_async((1, 1), queue="nobody-serves-this")
    queued.revoke()
    assert queued.state == states.REVOKED
    with pytest.raises(TaskRevokedError):
        queued.get(timeout=5)

    revoked = []
    signals.task_revoked.connect(lambda sender=None, request=None, terminated=None, **kw:
                                 revoked.append((sender, request.id, terminated)), weak=False)
    running = sleepy.delay(30)
    sample_app.conf.task_track_started = True   # as in Celery, STARTED is only reported when tracked
    try:
        wait_for(lambda: running.state == states.STARTED, timeout=15)
    finally:
        sample_app.conf.task_track_started = False
    started = time.monotonic()
    AsyncResult(running.id, app=sample_app).revoke(terminate=True)
    assert running.state == states.REVOKED
    with pytest.raises(TaskRevokedError):
        running.get(timeout=5)
    assert time.monotonic() - started < 10
    wait_for(lambda: (sleepy, running.id, True) in revoked, timeout=10)   # sent by the worker that stopped it


def test_unknown_ids_are_pending(sample_app) -> None:
    assert AsyncResult("no-such-task-id", app=sample_app).state == states.PENDING


def test_expires_revokes_a_task_nobody_started() -> None:
    from proj.tasks import add

    result = add.apply_async((1, 2), queue="nobody-serves-this-either", expires=1)
    wait_for(lambda: result.state == states.REVOKED, timeout=15)


def test_rate_limit_is_honoured_per_worker() -> None:
    from proj.tasks import limited

    started = time.monotonic()
    results = [limited.delay(i) for i in range(12)]
    assert [r.get(timeout=30) for r in results] == list(range(12))
    assert time.monotonic() - started >= 1.5          # 12 tasks at 4/s: the bucket's 4, then 8 more at 4/s


def test_link_error_calls_the_errback_with_the_failed_task_id() -> None:
    from proj.tasks import ERRBACKS, explode, remember_failure

    result = explode.apply_async(("linked",), link_error=remember_failure.s("noted"))
    with pytest.raises(ValueError, match="linked"):
        result.get(timeout=30)
    wait_for(lambda: any(note == "noted" for _, note, _ in ERRBACKS), timeout=15)
    failed_id, _, exc = next(entry for entry in ERRBACKS if entry[1] == "noted")
    assert failed_id.startswith(result.id)
    assert isinstance(exc, ValueError) and "linked" in str(exc)   # the task's own exception, rebuilt


def test_an_unimportable_exception_type_comes_back_as_remote_task_error() -> None:
    from sync_worker_celery.exceptions import RemoteTaskError
    from sync_worker_celery.result import rebuild_exception

    error = rebuild_exception("GatewayDown", "payments.errors.GatewayDown", "no route", "Traceback ...")
    assert isinstance(error, RemoteTaskError)
    assert (error.exc_type, error.message, error.traceback) == ("GatewayDown", "no route", "Traceback ...")
    assert isinstance(rebuild_exception("KeyError", "builtins.KeyError", "k"), KeyError)
