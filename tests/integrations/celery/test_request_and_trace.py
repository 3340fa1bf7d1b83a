"""What a task sees of its call and what the worker logs, as in Celery: ``request.properties``
(publish options such as ``app_id=``), ``request.replaced_task_nesting`` through replacements
(plain and in a chain), ``track_started``, and Celery's trace log lines (``celery.worker.strategy``
received, ``celery.app.trace`` succeeded / failed) with their ``data``; ``control.ping()`` and
``inspect().ping()`` from the server's worker list."""

from __future__ import annotations

import logging

import pytest
from sync_worker_celery import chain, states
from sync_worker_celery.app import trace

from ._support import wait_for

pytestmark = pytest.mark.usefixtures("sample_worker")


def test_publish_options_reach_the_task_as_message_properties() -> None:
    from proj.tasks import request_view

    view = request_view.apply_async(app_id="1234").get(timeout=30)
    assert view["properties"]["app_id"] == "1234"
    assert view["properties"]["correlation_id"]
    assert view["replaced_task_nesting"] == 0


def test_replaced_task_nesting_counts_replacements() -> None:
    from proj.tasks import add, nested_replace

    assert nested_replace.delay(0).get(timeout=30) == 0
    assert nested_replace.delay(2).get(timeout=60) == 2
    assert chain(add.si(1, 1), nested_replace.si(1)).apply_async().get(timeout=60) == 1


def test_celery_trace_log_lines_with_their_data(caplog: pytest.LogCaptureFixture) -> None:
    from proj.tasks import add, explode

    caplog.set_level(logging.INFO, logger="celery")
    ok = add.apply_async((2, 2), argsrepr="(two, two)")
    assert ok.get(timeout=30) == 4
    bad = explode.delay("trace me")
    with pytest.raises(ValueError):
        bad.get(timeout=30)

    def lines(task_id: str) -> list:
        return [(r.name, r.levelno, r.msg, r.data["args"]) for r in caplog.records
                if r.name in ("celery.worker.strategy", "celery.app.trace") and r.data["id"] == task_id]

    assert lines(ok.id) == [("celery.worker.strategy", logging.INFO, trace.LOG_RECEIVED, "(two, two)"),
                            ("celery.app.trace", logging.INFO, trace.LOG_SUCCESS, "(two, two)")]
    assert [line[:3] for line in lines(bad.id)] == [("celery.worker.strategy", logging.INFO, trace.LOG_RECEIVED),
                                                    ("celery.app.trace", logging.ERROR, trace.LOG_FAILURE)]
    success = next(r for r in caplog.records if r.name == "celery.app.trace" and r.data["id"] == ok.id)
    message = success.getMessage()
    assert message.startswith(f"Task proj.tasks.add[{ok.id}] succeeded in ") and message.endswith(": 4")


def test_ping_and_registered_from_the_servers_worker_list(sample_app) -> None:
    from sync_worker_celery.exceptions import UnsupportedFeature

    replies = sample_app.control.inspect().ping()
    assert replies and all(reply == {"ok": "pong"} for reply in replies.values())
    assert sample_app.control.ping() == [{name: {"ok": "pong"}} for name in replies]
    assert sample_app.control.inspect(destination=["nobody"]).ping() is None
    registered = sample_app.control.inspect().registered()
    assert any("proj.tasks.add" in names for names in registered.values())
    with pytest.raises(UnsupportedFeature, match=r"inspect\(\)\.active\(\)"):
        sample_app.control.inspect().active()


def test_an_exception_raised_with_several_arguments_comes_back_with_them() -> None:
    from proj.tasks import TwoArgError, explode_with_two

    with pytest.raises(TwoArgError) as raised:
        explode_with_two.delay("first", 2).get(timeout=30)
    assert raised.value.args == ("first", 2)


def test_a_soft_limit_above_the_hard_limit_fails_the_task() -> None:
    from proj.tasks import add

    with pytest.raises(ValueError, match="soft_time_limit must be less than or equal to time_limit"):
        add.apply_async((1, 2), soft_time_limit=5, time_limit=2).get(timeout=30)


def test_children_called_from_a_task_get_its_ids(sample_app) -> None:
    from proj.tasks import call_children

    result = call_children.delay()
    seen = result.get(timeout=30)
    assert seen["applied"] == [result.id, result.id, "applied"]     # root_id, parent_id, label
    published = sample_app.AsyncResult(seen["published"]).get(timeout=30)
    assert published == [result.id, result.id, "published"]


def test_a_task_with_callbacks_is_ready_before_its_callbacks_finish(sample_app) -> None:
    """Celery stores a task's result when it ends; its link / link_error callbacks are other messages."""
    from proj.tasks import add, explode, sleepy

    ok = add.apply_async((1, 2), link=sleepy.si(6))
    assert ok.get(timeout=4) == 3 and ok.state == states.SUCCESS
    bad = explode.apply_async(("with errback",), link_error=sleepy.si(6))
    with pytest.raises(ValueError, match="with errback"):
        bad.get(timeout=4)
    running = ("running", "waiting")
    assert sample_app.client.describe_workflow(bad.id).status in running   # the errback still runs, durably
    wait_for(lambda: sample_app.client.describe_workflow(bad.id).status not in running, timeout=30)


def test_a_task_is_named_as_its_function_like_celerys() -> None:
    """``task.__name__`` is the function's name (pytest ids of parametrized tasks depend on it)."""
    from proj.tasks import add

    assert add.__name__ == "add" and add.name == "proj.tasks.add"
