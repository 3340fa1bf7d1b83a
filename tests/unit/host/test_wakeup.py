"""``until_stop_signal``: the foreground wait of ``sync-worker devserver`` and ``durable_devserver``."""

from __future__ import annotations

import os
import signal
import threading
import time

from sync_worker.host.wakeup import until_stop_signal


def test_wait_returns_when_a_stop_signal_arrives_and_the_handlers_are_put_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with until_stop_signal() as wait:
        assert signal.getsignal(signal.SIGTERM) is not before
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM))
        t0 = time.monotonic()
        timer.start()
        wait()
        waited = time.monotonic() - t0
    assert 0.15 <= waited < 5.0
    assert signal.getsignal(signal.SIGTERM) is before


def _rescue(done: threading.Event) -> None:
    if not done.is_set():  # the wait hung: end it, and let the elapsed-time assertion fail
        os.kill(os.getpid(), signal.SIGINT)


def test_many_signals_in_a_row_never_hang_the_wait() -> None:
    """The handler takes no lock (a handler setting a threading.Event could deadlock on its own
    lock): each of many rounds, a signal sent at a random moment ends the wait."""
    import random

    rng = random.Random(7)
    for _ in range(30):
        with until_stop_signal() as wait:
            timer = threading.Timer(rng.uniform(0.0, 0.02), os.kill, (os.getpid(), signal.SIGINT))
            timer.start()
            done = threading.Event()
            watchdog = threading.Timer(5.0, _rescue, (done,))
            watchdog.start()
            t0 = time.monotonic()
            wait()
            done.set()
            watchdog.cancel()
            timer.join()
            assert time.monotonic() - t0 < 4.0
