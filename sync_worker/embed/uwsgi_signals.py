"""uWSGI web workers: drain on the stop signal itself, then let uWSGI's own handler act on it.

Why not only ``uwsgi.atexit``: uWSGI's Python plugin runs no exit hook at all (neither
``uwsgi.atexit`` nor Python's ``atexit``) in a web worker that is busy with a request, or
with a uWSGI signal, when it exits (``uwsgi_python_atexit`` returns at once when
``uwsgi_worker_is_busy``), and a web worker told to stop by SIGINT or SIGTERM (the master's
shutdown, brutal reload) calls ``exit()`` right in the signal handler, request or not. A web
worker caught in a request would leave its registrations ``active`` and its leased tasks to
the lease timeout.

So the stop signals (SIGHUP, SIGINT, SIGTERM: what the master sends a web worker) reach this
module first, and only then uWSGI:

1. :func:`arm` (main thread, in the postfork hook or a lazy app's import) installs a Python
   handler for them, which puts Python's C-level handler in place (async-signal-safe: it sets
   a flag and writes the signal number to the ``signal.set_wakeup_fd`` pipe, from any thread),
   and records that C-level action.
2. uWSGI installs its own worker handlers after both of those points, so the watcher thread
   waits (polling ``sigaction``) until each has been replaced, keeps uWSGI's action and puts
   Python's back.
3. On a stop signal the watcher drains the embedded workers within the budget (a second stop
   signal turns the drain cold), puts uWSGI's actions back and sends the signal again to the
   main thread: uWSGI's handler does what it always did (exit at once, or end the request in
   flight and exit). The web worker keeps serving during the drain; readiness is 503 from the
   first signal.

``sigaction`` is called through ``ctypes`` with an opaque buffer larger than any libc's
``struct sigaction``: the action is only read and written back, never interpreted beyond its
first field (the handler's address). Where that is unavailable, :func:`arm` returns False
and the ``atexit`` hook alone stays (it covers every stop of an idle web worker).
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import signal
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .handle import EmbeddedWorkers

__all__ = ["STOP_SIGNALS", "arm"]

logger = logging.getLogger("sync_worker.embed.uwsgi")

#: What the uWSGI master sends a web worker: SIGHUP (graceful reload), SIGINT (shutdown), SIGTERM (brutal reload).
STOP_SIGNALS: Tuple[int, ...] = (int(signal.SIGHUP), int(signal.SIGINT), int(signal.SIGTERM))

_ACTION_BYTES = 512  # glibc x86-64 needs 152, macOS 16: room for any libc's struct sigaction
_POLL_FAST, _POLL_SLOW, _FAST_FOR = 0.01, 0.2, 5.0
#: uWSGI installs its handlers right after the postfork hooks or a lazy app's import; stop looking after this.
_TAKE_OVER_FOR = 120.0


class _Sigaction:
    """``sigaction(2)`` through ctypes, the action kept as opaque bytes."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._call = libc.sigaction
        self._call.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        self._call.restype = ctypes.c_int

    def get(self, signum: int) -> bytes:
        buffer = ctypes.create_string_buffer(_ACTION_BYTES)
        if self._call(signum, None, buffer) != 0:
            raise OSError(ctypes.get_errno(), f"sigaction({signum}) failed")
        return buffer.raw

    def put(self, signum: int, action: bytes) -> None:
        buffer = ctypes.create_string_buffer(action, _ACTION_BYTES)
        if self._call(signum, buffer, None) != 0:
            raise OSError(ctypes.get_errno(), f"sigaction({signum}) failed")

    @staticmethod
    def handler_of(action: bytes) -> bytes:
        """The handler's address: the first field of every libc's struct sigaction."""
        return action[:ctypes.sizeof(ctypes.c_void_p)]


def _noted(signum: int, frame: Any) -> None:
    """The Python-level handler (main thread, between two bytecodes): nothing to do, the watcher acts."""


class _Watcher:
    def __init__(self, handle: EmbeddedWorkers, budget: Callable[[], float], sigaction: _Sigaction,
                 ours: Dict[int, bytes], before: Dict[int, bytes], wake_read: int, main_ident: int) -> None:
        self.handle = handle
        self._budget = budget
        self._sigaction = sigaction
        self._ours = ours  # Python's C-level action, per signal
        self._theirs = dict(before)  # what the signal is handed to after the drain: uWSGI's, once it is in place
        self._pending = list(STOP_SIGNALS)  # not yet replaced by uWSGI
        self._read = wake_read
        self._main = main_ident
        self._started = time.monotonic()

    def run(self) -> None:
        signum = 0
        try:
            signum = self._wait_for_stop()
            self._drain(signum)
        except Exception:  # never leave the process without its stop handlers, nor lose the signal
            logger.exception("pid %d: the stop-signal watcher failed; handing the signals back to uWSGI", os.getpid())
        self._hand_back(signum)

    def _take_over(self) -> None:
        """Each stop signal whose handler uWSGI has installed since :func:`arm`: keep it, put Python's back."""
        for signum in list(self._pending):
            action = self._sigaction.get(signum)
            if _Sigaction.handler_of(action) != _Sigaction.handler_of(self._ours[signum]):
                self._sigaction.put(signum, self._ours[signum])
                self._theirs[signum] = action
                self._pending.remove(signum)

    def _signals(self, timeout: Optional[float]) -> List[int]:
        ready, _, _ = select.select([self._read], [], [], timeout)
        if not ready:
            return []
        try:
            data = os.read(self._read, 256)
        except BlockingIOError:
            return []
        return [s for s in data if s in STOP_SIGNALS]

    def _wait_for_stop(self) -> int:
        while True:
            if self._pending:
                self._take_over()
            waited = time.monotonic() - self._started
            if self._pending and waited >= _TAKE_OVER_FOR:
                logger.warning("pid %d: uWSGI installed no handler of signal(s) %s within %.0f s; they stay with "
                               "the embedding and are handed to the handlers found at setup()", os.getpid(),
                               self._pending, _TAKE_OVER_FOR)
                self._pending = []
            timeout: Optional[float] = None  # nothing to look for: sleep until a signal
            if self._pending:
                timeout = _POLL_FAST if waited < _FAST_FOR else _POLL_SLOW
            got = self._signals(timeout)
            if got:
                return got[0]

    def _drain(self, signum: int) -> None:
        budget = self._budget()
        name = signal.Signals(signum).name
        logger.info("pid %d: %s: draining the embedded workers within %.1f s before uWSGI acts on it",
                    os.getpid(), name, budget)
        self.handle.request_drain(budget)
        deadline = time.monotonic() + budget + 2.0
        cold = False
        while self.handle.mode != "stopped" and time.monotonic() < deadline:
            if self._signals(0.05) and not cold:  # a second stop signal: do not wait for work in flight
                cold = True
                self.handle.request_drain(cold=True)
        clean = self.handle.stop(budget)
        logger.info("pid %d: embedded workers %s (%s)", os.getpid(),
                    "drained and deregistered" if clean else "stopped with work abandoned or errors", name)

    def _hand_back(self, signum: int) -> None:
        for each in STOP_SIGNALS:
            try:
                self._sigaction.put(each, self._theirs[each])
            except OSError as error:
                logger.error("pid %d: could not hand signal %d back to uWSGI: %s", os.getpid(), each, error)
        if signum:
            signal.pthread_kill(self._main, signum)


def arm(handle: EmbeddedWorkers, budget: Callable[[], float]) -> bool:
    """In a uWSGI web worker's main thread: drain ``handle`` on the stop signals before uWSGI acts on them.

    ``budget()`` gives the drain's seconds when a stop signal arrives. False (and nothing
    changed) where it cannot be done: not the main thread, another wakeup fd in use, no
    ``sigaction`` through ctypes.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        sigaction = _Sigaction()
        before = {s: sigaction.get(s) for s in STOP_SIGNALS}
    except (OSError, AttributeError) as error:
        logger.warning("pid %d: no sigaction through ctypes (%s): only uwsgi.atexit drains the embedded workers, "
                       "and uWSGI skips it in a web worker busy with a request", os.getpid(), error)
        return False
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    previous_fd = signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    if previous_fd != -1:  # the app's own (asyncio?): leave it alone
        signal.set_wakeup_fd(previous_fd)
        os.close(wake_read)
        os.close(wake_write)
        logger.warning("pid %d: signal.set_wakeup_fd is in use: only uwsgi.atexit drains the embedded workers, "
                       "and uWSGI skips it in a web worker busy with a request", os.getpid())
        return False
    for signum in STOP_SIGNALS:
        signal.signal(signum, _noted)
    ours = {s: sigaction.get(s) for s in STOP_SIGNALS}
    watcher = _Watcher(handle, budget, sigaction, ours, before, wake_read, threading.get_ident())
    thread = threading.Thread(target=watcher.run, name=f"sync-worker-uwsgi-stop-{os.getpid()}", daemon=True)
    thread.start()
    return True
