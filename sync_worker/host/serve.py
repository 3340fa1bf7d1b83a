"""``serve(runtime)``: run a runtime in the foreground until a signal stops it; returns the exit code.

Every worker command ends here (``sync-worker run``, ``sync-worker celery ... worker``,
``sync-worker nestjs``, ``manage.py durable_worker``). Signal handlers only set flags and wake
the foreground, which acts on them:

* first SIGTERM or SIGINT: warm stop (stop taking work, drain within the runtime's shutdown
  timeout while heartbeats go on, then deregister);
* a second SIGTERM/SIGINT, or SIGQUIT at any time: cold stop (running work is abandoned, the
  registration is kept, the process exits).

The runtime runs on its own thread (a greenlet in a gevent-patched process); the calling thread
sleeps on a :class:`~sync_worker.host.wakeup.Wakeup` until a signal or the runtime's end wakes
it: no polling loop. Exit codes are :mod:`sync_worker.host.exits`.
"""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from .exits import EXIT_COLD_STOP, EXIT_FAILED, EXIT_INCOMPLETE, exit_code
from .protocols import Servable
from .wakeup import Wakeup

__all__ = ["ServeMessages", "ShutdownFlags", "serve"]

logger = logging.getLogger("sync_worker.host")


@dataclass(frozen=True)
class ServeMessages:
    """What the foreground logs when it starts a warm or a cold stop (each door keeps its wording)."""

    warm: str = "warm shutdown: draining (send the signal again, or SIGQUIT, to stop at once)"
    cold: str = "cold stop: abandoning running work and exiting"


class ShutdownFlags:
    """Set by the signal handlers, read by the foreground (the handlers do nothing else)."""

    def __init__(self, wake: Optional[Callable[[], None]] = None) -> None:
        self.warm = False
        self.cold = False
        self.signals = 0
        self._wake = wake

    def on_term(self, signum: int, frame: Any) -> None:
        """SIGTERM/SIGINT: warm the first time, cold the second."""
        self.signals += 1
        if self.warm:
            self.cold = True
        self.warm = True
        self._notify()

    def on_quit(self, signum: int, frame: Any) -> None:
        """SIGQUIT: cold at once."""
        self.signals += 1
        self.warm = True
        self.cold = True
        self._notify()

    def _notify(self) -> None:
        if self._wake is not None:
            self._wake()


def serve(runtime: Servable, *, log: Optional[logging.Logger] = None,
          messages: ServeMessages = ServeMessages()) -> int:
    """Run ``runtime`` until it ends or a signal stops it; the exit code (:mod:`~sync_worker.host.exits`).

    Installs SIGTERM, SIGINT and SIGQUIT handlers for the duration (the previous ones are put
    back); call it from the main thread. ``log`` is the logger of the door (default
    ``sync_worker.host``); ``messages`` its wording of the warm and cold stop lines.
    """
    out = log if log is not None else logger
    wakeup = Wakeup()
    flags = ShutdownFlags(wakeup.notify)
    ended = threading.Event()
    errors: List[BaseException] = []
    previous: Dict[int, Any] = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, flags.on_term),
        signal.SIGINT: signal.signal(signal.SIGINT, flags.on_term),
    }
    if hasattr(signal, "SIGQUIT"):
        previous[signal.SIGQUIT] = signal.signal(signal.SIGQUIT, flags.on_quit)

    def run() -> None:
        try:
            runtime.run()
        except BaseException as error:
            errors.append(error)
        finally:
            ended.set()
            wakeup.notify()

    def request_stop(cold: bool) -> None:
        try:
            runtime.stop(cold=cold)
        except BaseException:  # the run thread reports the shared result
            pass

    runner = threading.Thread(target=run, name="sync-worker-main", daemon=True)
    runner.start()
    warm_sent = cold_sent = False
    try:
        while not ended.is_set():
            wakeup.wait()
            if flags.cold and not cold_sent:
                cold_sent = warm_sent = True
                out.warning("%s", messages.cold)
                threading.Thread(target=request_stop, args=(True,), name="sync-worker-stop", daemon=True).start()
            elif flags.warm and not warm_sent:
                warm_sent = True
                out.info("%s", messages.warm)
                threading.Thread(target=request_stop, args=(False,), name="sync-worker-stop", daemon=True).start()
        runner.join()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        wakeup.close()
    error = errors[0] if errors else None
    code = exit_code(error, cold=cold_sent)
    if code == EXIT_COLD_STOP:
        from ..worker import ShutdownIncomplete

        if error is not None and not isinstance(error, ShutdownIncomplete):
            out.error("worker stopped with an error: %s", error)
    elif code == EXIT_INCOMPLETE:
        out.error("%s", error)
    elif code == EXIT_FAILED:
        out.error("worker failed: %s: %s", type(error).__name__, error)
    return code
