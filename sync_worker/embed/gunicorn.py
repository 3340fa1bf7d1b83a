"""gunicorn server hooks that run embedded workers in every web worker process.

In ``gunicorn.conf.py``::

    from sync_worker.embed.gunicorn import post_worker_init, worker_abort, worker_exit, worker_int  # noqa: F401
    SYNC_WORKER_FACTORY = "myapp.worker:build_workers"   # or the environment variable of that name

* ``post_worker_init`` (in each web worker, after the app is loaded and, for the gevent
  worker class, after gevent patched the process) builds the workers from the factory and
  starts them: greenlets under ``-k gevent``, threads under ``sync`` and ``gthread``. It also
  chains a flag-only SIGTERM handler, so the drain starts the moment gunicorn asks the worker
  to stop (readiness turns false at once) while in-flight requests finish, and flag-only
  SIGQUIT/SIGINT handlers that turn it cold before gunicorn's own quick-exit handler runs (the
  gthread worker's can block for good when the signal lands while its main thread holds the
  thread pool's lock, so ``worker_int`` would never be called).
* ``worker_exit`` (after the web worker's loop ended: SIGTERM, SIGHUP reload, ``max_requests``
  recycling) waits for the drain, started there if no signal started it, within
  ``min(graceful_timeout, timeout)`` minus a second, then the process exits. Work still
  running at that deadline is abandoned; the server retries it after its timeout.
* ``worker_int`` (SIGINT/SIGQUIT quick shutdown) and ``worker_abort`` (SIGABRT, the worker
  timed out) turn the drain cold.

Importing this module in the gunicorn master (the config file does) marks the master a
forking parent, so ``--preload`` code that calls :func:`sync_worker.embed.start` at import
gets a clear error instead of threads that die in the fork; nothing here starts a thread
in the master. Use :func:`start_in_worker` / :func:`drain_worker` from hooks of your own.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Any, Dict, Mapping, Optional

from . import current, mark_forking_parent, start
from .handle import EmbeddedWorkers
from .settings import read_settings

__all__ = ["drain_budget", "drain_worker", "post_worker_init", "start_in_worker", "worker_abort", "worker_exit",
           "worker_int"]

logger = logging.getLogger("sync_worker.embed.gunicorn")

#: Seconds kept back from the drain budget, for the deregistration and the process exit.
DRAIN_MARGIN_SECONDS = 1.0

if "gunicorn.arbiter" in sys.modules:  # loaded by a gunicorn master (the config file imports us)
    mark_forking_parent("a gunicorn master (arbiter)")


def _config_namespace(worker: Any) -> Mapping[str, Any]:
    """The variables of the gunicorn config file (gunicorn keeps only its own settings)."""
    module = sys.modules.get("__config__")  # what gunicorn names a config file it loaded
    location = getattr(getattr(worker, "cfg", None), "config", None)
    if isinstance(location, str) and location.startswith("python:"):
        module = sys.modules.get(location[len("python:"):], module)
    return vars(module) if module is not None else {}


def _pool_for(worker: Any) -> str:
    """Greenlets for the gevent worker classes, threads for sync/gthread."""
    for cls in type(worker).__mro__:
        if cls.__module__.startswith("gunicorn.workers.ggevent"):
            return "gevent"
        if cls.__module__.startswith("gunicorn.workers.geventlet"):
            from .errors import EmbedConfigError

            raise EmbedConfigError("the eventlet worker class is not supported; use -k gevent, gthread or sync")
    return "threads"


def drain_budget(worker: Any) -> float:
    """Seconds a web worker may spend draining: min(graceful_timeout, timeout) minus a margin."""
    cfg = worker.cfg
    graceful = float(getattr(cfg, "graceful_timeout", 30) or 30)
    silent = float(getattr(cfg, "timeout", 0) or 0)  # the master kills a worker silent for this long
    bound = min(graceful, silent) if silent > 0 else graceful
    return max(0.0, bound - DRAIN_MARGIN_SECONDS)


def start_in_worker(worker: Any) -> EmbeddedWorkers:
    """Start the configured embedded workers in this gunicorn web worker (the body of post_worker_init)."""
    settings = read_settings(_config_namespace(worker))
    handle = start(settings.factory, concurrency=settings.concurrency, pool=_pool_for(worker),
                   one_per_host=settings.one_per_host, lock_path=settings.lock_file)
    budget = drain_budget(worker)
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: Any) -> None:  # flags only; the handle's monitor drains
        handle.request_drain(budget)
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGTERM, on_term)
    signal.siginterrupt(signal.SIGTERM, False)  # as gunicorn set it: do not break in-flight requests
    quit_handlers: Dict[int, Any] = {int(s): signal.getsignal(s) for s in (signal.SIGQUIT, signal.SIGINT)}

    def on_quit(signum: int, frame: Any) -> None:  # flags first: gunicorn's handler may never return
        handle.request_drain(budget, cold=True)
        previous_quit = quit_handlers.get(signum)
        if callable(previous_quit):
            previous_quit(signum, frame)

    for signum in quit_handlers:
        signal.signal(signum, on_quit)
    log = getattr(worker, "log", None)
    if log is not None:
        log.info("sync-worker: embedded workers %s in pid %s (%s)", handle.mode, os.getpid(),
                 ", ".join(w.task_queue for w in handle.workers) or "standing by")
    return handle


def drain_worker(worker: Any, *, cold: bool = False) -> Optional[bool]:
    """Drain and deregister this web worker's embedded workers within :func:`drain_budget` (worker_exit)."""
    handle = current()
    if handle is None:  # the master (worker_exit also runs there for a vanished worker) or nothing started
        return None
    budget = drain_budget(worker)
    started = handle.drain_started
    if started is not None:
        budget = max(0.0, budget - (time.monotonic() - started))
    began = time.monotonic()
    clean = handle.stop(budget, cold=cold)
    log = getattr(worker, "log", None)
    if log is not None:
        log.info("sync-worker: embedded workers of pid %s %s in %.1f s", os.getpid(),
                 "drained and deregistered" if clean else "stopped with work abandoned or errors",
                 time.monotonic() - began)
    return clean


def post_worker_init(worker: Any) -> None:
    """gunicorn hook: start the embedded workers in this web worker."""
    start_in_worker(worker)


def worker_int(worker: Any) -> None:
    """gunicorn hook (SIGINT/SIGQUIT, quick shutdown): the drain goes cold."""
    handle = current()
    if handle is not None:
        handle.request_drain(cold=True)


def worker_abort(worker: Any) -> None:
    """gunicorn hook (SIGABRT: the web worker timed out): the drain goes cold."""
    worker_int(worker)


def worker_exit(server: Any, worker: Any) -> None:
    """gunicorn hook: drain and deregister within the graceful timeout before the process exits."""
    handle = current()
    cold = handle is not None and handle.cold_requested
    drain_worker(worker, cold=cold)
