"""The uWSGI module's checks against a stand-in ``uwsgi`` object (the real servers: test_uwsgi.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sync_worker.embed import EmbedConfigError
from sync_worker.embed import uwsgi as embedded


def _uwsgi(**opt: Any) -> Any:
    has_threads = opt.pop("has_threads", None)
    fake = SimpleNamespace(opt={k.replace("_", "-"): v for k, v in opt.items()})
    if has_threads is not None:
        fake.has_threads = has_threads
    return fake


def test_threads_check_reads_has_threads_then_the_options() -> None:
    with pytest.raises(EmbedConfigError, match="--enable-threads"):
        embedded.check_threads(_uwsgi(has_threads=0))
    embedded.check_threads(_uwsgi(has_threads=1))
    with pytest.raises(EmbedConfigError, match="without thread support"):
        embedded.check_threads(_uwsgi())  # an old uWSGI without has_threads and no option
    embedded.check_threads(_uwsgi(enable_threads=True))
    embedded.check_threads(_uwsgi(threads=b"4"))


def test_drain_budget_is_the_reload_mercy_minus_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(embedded.DRAIN_TIMEOUT_ENV, raising=False)
    assert embedded.drain_budget(_uwsgi()) == 59.0
    assert embedded.drain_budget(_uwsgi(worker_reload_mercy=b"15")) == 14.0
    monkeypatch.setenv(embedded.DRAIN_TIMEOUT_ENV, "7.5")
    assert embedded.drain_budget(_uwsgi(worker_reload_mercy=b"15")) == 7.5
    monkeypatch.setenv(embedded.DRAIN_TIMEOUT_ENV, "soon")
    with pytest.raises(EmbedConfigError, match="number of seconds"):
        embedded.drain_budget(_uwsgi())


def test_setup_outside_uwsgi_is_a_clear_error() -> None:
    with pytest.raises(EmbedConfigError, match="only inside a uWSGI process"):
        embedded.setup("tests.integrations.embed.worker_app:build")
