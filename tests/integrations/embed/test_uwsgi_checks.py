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


def test_the_loop_engine_check_refuses_only_the_gevent_engine() -> None:
    with pytest.raises(EmbedConfigError, match=r"gevent loop engine .* mule"):
        embedded.check_loop_engine(_uwsgi(gevent=b"20"))
    embedded.check_loop_engine(_uwsgi())
    embedded.check_loop_engine(_uwsgi(threads=b"4"))


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


# A process standing in for a uWSGI web worker: arm(), then "uWSGI" installs its own C-level
# action (SIG_DFL through sigaction, leaving Python's handler table alone, as uWSGI does), then
# the stop signal(s) arrive. SIG_DFL ends the process, so the exit status says the signal was
# handed back to "uWSGI"; the lines printed before it say the drain came first.
_WEB_WORKER = r"""
import os, signal, sys, threading, time
from sync_worker.embed import uwsgi_signals

class Handle:
    mode = "running"
    def request_drain(self, timeout=None, *, cold=False):
        print("request_drain", timeout, cold, flush=True)
        if cold or not {cold_needed}:
            threading.Timer(0.3, lambda: setattr(self, "mode", "stopped")).start()
    def stop(self, timeout=None, *, cold=False):
        print("stop", self.mode, flush=True)
        return True

assert uwsgi_signals.arm(Handle(), lambda: 4.5)
sigaction = uwsgi_signals._Sigaction()
uwsgi_default = bytes(512)  # handler 0: SIG_DFL
for signum in uwsgi_signals.STOP_SIGNALS:
    sigaction.put(signum, uwsgi_default)
time.sleep(0.3)  # the watcher takes Python's handler back
handler = uwsgi_signals._Sigaction.handler_of
assert all(handler(sigaction.get(s)) != handler(uwsgi_default) for s in uwsgi_signals.STOP_SIGNALS)
for _ in range({signals}):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.1)
print("serving", flush=True)  # the main thread goes on while the watcher drains
time.sleep(10)
print("not handed back", flush=True)
"""


@pytest.mark.parametrize("signals", [1, 2])
def test_the_stop_signal_drains_first_then_reaches_the_handler_uwsgi_installed(signals: int) -> None:
    import signal
    import subprocess
    import sys

    script = _WEB_WORKER.replace("{cold_needed}", str(signals == 2)).replace("{signals}", str(signals))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stdout, done.stderr)
    assert lines[0] == "request_drain 4.5 False", lines
    if signals == 2:  # a second stop signal turns the drain cold
        assert "request_drain None True" in lines, lines
    assert "serving" in lines and lines[-1] == "stop stopped", lines
