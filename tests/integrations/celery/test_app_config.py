"""App configuration without a server: settings loading, annotations, notices, names."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from sync_worker_celery import Celery, signals
from sync_worker_celery.exceptions import ImproperlyConfigured, UnsupportedFeature


def test_namespaced_settings_are_read_lazily_with_celery_names() -> None:
    source = SimpleNamespace(CELERY_TASK_ALWAYS_EAGER=True, CELERY_TASK_DEFAULT_QUEUE="jobs", DEBUG=True,
                             CELERY_TASK_ROUTES={"a.*": "fast"})
    app = Celery("cfg", set_as_current=False)
    app.config_from_object(source, namespace="CELERY")
    source.CELERY_TASK_DEFAULT_RETRY_DELAY = 7          # read on first use, as Celery does
    assert app.conf.task_always_eager is True and app.conf.task_default_queue == "jobs"
    assert app.conf.task_default_retry_delay == 7 and "debug" not in app.conf
    assert app.conf.task_routes == {"a.*": "fast"}


def test_old_uppercase_names_and_plain_dicts() -> None:
    app = Celery("cfg-old", set_as_current=False)
    app.config_from_object({"CELERY_ALWAYS_EAGER": True, "task_eager_propagates": True}, force=True)
    assert app.conf.task_always_eager and app.conf.task_eager_propagates


def test_task_names_defaults_and_annotations() -> None:
    app = Celery("cfg-ann", set_as_current=False)
    app.conf.task_annotations = {"*": {"max_retries": 9}, "tests.integrations.celery.test_app_config.slow": {
        "rate_limit": "1/s"}}

    @app.task
    def slow() -> None: ...

    @app.task(name="custom.name", queue="q1")
    def fast() -> None: ...

    app.finalize()
    assert slow.name == "tests.integrations.celery.test_app_config.slow"
    assert slow.max_retries == 9 and slow.rate_limit == "1/s"
    assert fast.name == "custom.name" and fast.queue == "q1" and app.tasks["custom.name"] is fast
    assert app.conf.task_default_queue == "celery"              # Celery's default


def test_ignored_and_unknown_settings_get_one_notice(caplog: pytest.LogCaptureFixture) -> None:
    app = Celery("cfg-notice", set_as_current=False)
    app.conf.worker_prefetch_multiplier = 1
    app.conf.some_custom_thing = 3
    with caplog.at_level(logging.WARNING, logger="sync_worker.celery"):
        app.finalize()
    text = caplog.text
    assert "setting worker_prefetch_multiplier is ignored: a worker leases only what its free slots can run" in text
    assert "setting some_custom_thing is not known to sync_worker_celery" in text


def test_never_sent_signals_say_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sync_worker.celery"):
        signals.after_setup_logger.connect(lambda **kw: None, weak=False)
    assert "signal after_setup_logger is never sent by sync_worker_celery" in caplog.text


def test_refusals_name_the_feature(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURABLE_WORKFLOW_SERVER_URL", raising=False)
    app = Celery("cfg-refuse", set_as_current=False)

    @app.task
    def one(x: int) -> int:
        return x

    with pytest.raises(UnsupportedFeature, match="chunks"):
        one.chunks([(1,)], 1)
    with pytest.raises(UnsupportedFeature, match=r"app\.control\.inspect\(\)\.active\(\)"):
        app.control.inspect().active()
    with pytest.raises(UnsupportedFeature, match=r"app\.control\.broadcast"):
        app.control.broadcast("shutdown")
    # No server configured: the local default, as every sync-worker command (issue 27: one rule).
    assert Celery("cfg-noserver", set_as_current=False).client_options().server_url == "http://127.0.0.1:7233"
    broken = Celery("cfg-badserver", set_as_current=False)
    broken.conf.durable_workflow_server_url = "http://127.0.0.1:7233/api"
    with pytest.raises(ImproperlyConfigured, match="leave out the trailing /api"):
        broken.client_options()
    with pytest.raises(TypeError, match="unknown task option"):
        app.task(bogus=True)(lambda: None)
