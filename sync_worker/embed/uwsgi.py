"""uWSGI: start embedded workers after the fork, drain them at exit, or run them in a mule.

In the WSGI module uWSGI loads (``module = myapp.wsgi``)::

    from sync_worker.embed import uwsgi as embedded
    embedded.setup()                      # factory from SYNC_WORKER_FACTORY, or setup("myapp.worker:build")
    application = HealthMiddleware(get_wsgi_application())

* Without ``lazy-apps`` the module is imported in the master: :func:`setup` marks the master
  a forking parent (nothing is started there) and chains a ``postfork`` hook that starts the
  workers in every web worker. With ``lazy-apps`` the module is imported in each worker after
  the fork, and :func:`setup` starts them at once.
* An ``atexit`` hook (``uwsgi.atexit``, chained) drains and deregisters the workers when a web
  worker stops: graceful reload (SIGHUP, ``max-requests``, ``reload-on-rss``) or shutdown.
  The budget is ``worker-reload-mercy`` (default 60 s) minus a second, or
  ``SYNC_WORKER_DRAIN_TIMEOUT``.
* Python threads must run between requests: uWSGI before the version that made
  ``enable-threads`` the default (2.0.x up to at least 2.0.21, the Debian 12 package) holds the
  GIL while a worker waits for a request unless ``enable-threads`` (or ``threads``) is set.
  :func:`setup` then raises :class:`~sync_worker.embed.EmbedConfigError` saying so, and uWSGI
  refuses to load the app, instead of running a worker that never polls.
* ``setup(mule=True)`` with ``mule = sync_worker.embed.uwsgi:mule`` runs the workers in one
  uWSGI mule only, not in the web workers. It is the way under uWSGI's gevent loop engine
  (``--gevent``), where :func:`setup` refuses to start workers in the web workers
  (:func:`check_loop_engine`).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any, Callable, Optional

from . import current, mark_forking_parent, start, uwsgi_signals
from .errors import EmbedConfigError

__all__ = ["check_threads", "drain_budget", "mule", "setup"]

logger = logging.getLogger("sync_worker.embed.uwsgi")

DRAIN_TIMEOUT_ENV = "SYNC_WORKER_DRAIN_TIMEOUT"
MULE_ENV = "SYNC_WORKER_UWSGI_MULE"
_MARGIN_SECONDS = 1.0

_factory: Any = None
_installed = False


def _uwsgi() -> Any:
    try:
        import uwsgi  # only exists inside a uWSGI process
    except ImportError:
        raise EmbedConfigError("sync_worker.embed.uwsgi works only inside a uWSGI process (import uwsgi failed)") \
            from None
    return uwsgi


def _opt(uwsgi: Any, name: str) -> Any:
    value = getattr(uwsgi, "opt", {}).get(name)
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def check_threads(uwsgi: Any = None) -> None:
    """Raise :class:`EmbedConfigError` when uWSGI runs this interpreter without Python threads."""
    uwsgi = uwsgi or _uwsgi()
    has_threads = getattr(uwsgi, "has_threads", None)
    if has_threads is None:  # very old uWSGI: only the options tell
        has_threads = bool(_opt(uwsgi, "enable-threads") or _opt(uwsgi, "threads"))
    if not has_threads:
        raise EmbedConfigError(
            "uWSGI runs Python without thread support, so embedded workers would never poll: add "
            "--enable-threads (enable-threads = true in the ini file) or --threads N to the uWSGI options")


def check_loop_engine(uwsgi: Any = None) -> None:
    """Raise :class:`EmbedConfigError` when the web workers run uWSGI's gevent loop engine (``--gevent``).

    Tried with uWSGI 2.0.31 (``--gevent 20 --gevent-monkey-patch``): the web workers served, but an
    embedded activity missed its heartbeat timeout and its run failed. A mule is not a web worker
    and does not run the loop engine: there the embedded workers run (tested).
    """
    uwsgi = uwsgi or _uwsgi()
    if _opt(uwsgi, "gevent"):
        raise EmbedConfigError(
            "uWSGI's gevent loop engine (--gevent) is not supported for workers embedded in the web workers "
            "(their activities miss heartbeats); run them in a mule instead (setup(mule=True) or "
            "SYNC_WORKER_UWSGI_MULE=1, with mule = sync_worker.embed.uwsgi:mule), or use gunicorn's gevent "
            "worker class")


def drain_budget(uwsgi: Any = None) -> float:
    """Seconds a web worker may spend draining at exit."""
    explicit = os.environ.get(DRAIN_TIMEOUT_ENV)
    if explicit:
        try:
            return max(0.0, float(explicit))
        except ValueError:
            raise EmbedConfigError(f"{DRAIN_TIMEOUT_ENV} must be a number of seconds, not {explicit!r}") from None
    uwsgi = uwsgi or _uwsgi()
    mercy = _opt(uwsgi, "worker-reload-mercy") or _opt(uwsgi, "reload-mercy") or 60
    try:
        return max(0.0, float(mercy) - _MARGIN_SECONDS)
    except (TypeError, ValueError):
        return 60.0 - _MARGIN_SECONDS


def _role(uwsgi: Any) -> str:
    if getattr(uwsgi, "mule_id", lambda: 0)():
        return "mule"
    if getattr(uwsgi, "i_am_the_spooler", lambda: False)():
        return "spooler"
    return "worker" if uwsgi.worker_id() > 0 else "master"


def _start_in_web_worker() -> None:
    uwsgi = _uwsgi()
    if _role(uwsgi) != "worker" or current() is not None:
        return
    handle = start(_factory)
    armed = uwsgi_signals.arm(handle, drain_budget)
    logger.info("uWSGI worker %s (pid %d): embedded workers %s%s", uwsgi.worker_id(), os.getpid(), handle.mode,
                "; they drain on the stop signal, before uWSGI acts on it" if armed else "")


def _drain_here() -> None:
    handle = current()
    if handle is None or handle.mode == "stopped":  # none, or drained on the stop signal already
        return
    budget = drain_budget()
    clean = handle.stop(budget)
    logger.info("pid %d: embedded workers %s", os.getpid(),
                "drained and deregistered" if clean else "stopped with work abandoned or errors")


def _chain_postfork(uwsgi: Any, hook: Callable[[], None]) -> None:
    try:
        import uwsgidecorators  # shipped with uWSGI
    except ImportError:
        previous = getattr(uwsgi, "post_fork_hook", None)

        def chained() -> None:
            if callable(previous):
                previous()
            hook()

        uwsgi.post_fork_hook = chained
    else:
        uwsgidecorators.postfork(hook)


def _chain_atexit(uwsgi: Any, hook: Callable[[], None]) -> None:
    previous = getattr(uwsgi, "atexit", None)

    def chained() -> None:
        try:
            hook()
        finally:
            if callable(previous):
                previous()

    uwsgi.atexit = chained


def setup(factory: Any = None, *, mule: Optional[bool] = None) -> None:
    """Wire the embedded workers into this uWSGI process tree (call it from the WSGI module).

    ``factory`` as for :func:`sync_worker.embed.start` (default ``SYNC_WORKER_FACTORY``).
    ``mule=True`` (or ``SYNC_WORKER_UWSGI_MULE=1``) leaves the web workers alone: the mule
    configured with ``mule = sync_worker.embed.uwsgi:mule`` runs the workers instead.
    """
    global _factory, _installed
    uwsgi = _uwsgi()
    check_threads(uwsgi)
    _factory = factory
    in_mule = bool(mule) if mule is not None else os.environ.get(MULE_ENV, "").lower() in ("1", "true", "yes")
    if not in_mule:
        check_loop_engine(uwsgi)
    role = _role(uwsgi)
    if role == "master":
        mark_forking_parent("the uWSGI master")
        if not in_mule and not _opt(uwsgi, "py-call-uwsgi-fork-hooks") and not _opt(uwsgi, "py-call-osafterfork"):
            logger.info("uWSGI loads the app in the master (no lazy-apps): a Client built at import is rebuilt in "
                        "each worker only with py-call-uwsgi-fork-hooks; the embedded workers build theirs after "
                        "the fork anyway")
    if _installed:
        return
    _installed = True
    if in_mule:
        return
    _chain_atexit(uwsgi, _drain_here)
    if role == "master":
        _chain_postfork(uwsgi, _start_in_web_worker)
    else:  # lazy-apps (or no master): this is already the web worker
        _start_in_web_worker()


def mule() -> None:
    """Entry point of a programmed mule (``mule = sync_worker.embed.uwsgi:mule``): run until told to stop.

    uWSGI asks a mule to stop with SIGHUP (reload) or SIGINT/SIGTERM/SIGQUIT (shutdown); the
    handlers only set a flag, then the workers drain within ``mule-reload-mercy`` minus a second
    (or ``SYNC_WORKER_DRAIN_TIMEOUT``) and the function returns.
    """
    uwsgi = _uwsgi()
    check_threads(uwsgi)
    handle = start(_factory or os.environ.get("SYNC_WORKER_FACTORY"))
    mercy = _opt(uwsgi, "mule-reload-mercy") or 60
    explicit = os.environ.get(DRAIN_TIMEOUT_ENV)
    budget = float(explicit) if explicit else max(0.0, float(mercy) - _MARGIN_SECONDS)
    stop = threading.Event()
    signalled = []

    def on_signal(signum: int, frame: Any) -> None:  # flags only
        signalled.append(signum)
        handle.request_drain(budget)

    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(signum, on_signal)
    logger.info("uWSGI mule %s (pid %d): embedded workers %s", uwsgi.mule_id(), os.getpid(), handle.mode)
    while not signalled:
        stop.wait(0.2)
    clean = handle.stop(budget)
    logger.info("uWSGI mule pid %d: embedded workers %s", os.getpid(),
                "drained and deregistered" if clean else "stopped with work abandoned or errors")
