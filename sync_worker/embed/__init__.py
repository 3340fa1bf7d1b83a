"""Running Workers inside a web server process (gunicorn, uWSGI, any pre-fork WSGI server).

``start(factory)`` builds the workers in the current process and runs them in the
background; the returned handle's ``stop()`` drains and deregisters them and ``status()``
reports them. Start *after* the fork (the hooks of :mod:`sync_worker.embed.gunicorn` and
:mod:`sync_worker.embed.uwsgi` do): a process known to be a forking parent (a gunicorn
master, the uWSGI master) is refused, and a handle used in a forked child raises
:class:`ForkedHandleError` (``handle.ensure_running()`` starts it anew there).
:class:`HealthMiddleware` serves ``/healthz`` and ``/readyz`` from the workers' status.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, Optional, Set

from ..runtime.backend import check_pool, default_pool
from .errors import EmbedConfigError, EmbedError, ForkedHandleError
from .factory import SERVER_URL_ENV, FactorySpec, client_from_environment
from .handle import EmbeddedStatus, EmbeddedWorkers, _ensure_not_running
from .hostlock import HostLock, default_lock_path
from .middleware import HealthMiddleware
from .settings import DEFAULT_CONCURRENCY, read_settings

__all__ = [
    "DEFAULT_CONCURRENCY",
    "EmbedConfigError",
    "EmbedError",
    "EmbeddedStatus",
    "EmbeddedWorkers",
    "ForkedHandleError",
    "HealthMiddleware",
    "current",
    "mark_forking_parent",
    "start",
]

_lock = threading.Lock()
_handles: Dict[int, EmbeddedWorkers] = {}
_forking_parents: Dict[int, str] = {}


def mark_forking_parent(reason: str, pid: Optional[int] = None) -> None:
    """Declare this process (or ``pid``) a parent that will fork web workers: start() refuses to run here."""
    _forking_parents[os.getpid() if pid is None else pid] = reason


def current() -> Optional[EmbeddedWorkers]:
    """The handle started in *this* process, or None (a handle inherited through a fork is not it)."""
    with _lock:
        return _handles.get(os.getpid())


def start(
    factory: Optional[FactorySpec] = None,
    *,
    concurrency: Optional[int] = None,
    pool: Optional[str] = None,
    client_factory: Optional[Callable[[], Any]] = None,
    one_per_host: Optional[bool] = None,
    lock_path: Optional[str] = None,
    standby_retry_seconds: float = 2.0,
    restart_failed: bool = True,
) -> EmbeddedWorkers:
    """Build the factory's workers here and run them in the background; returns the handle.

    ``factory``: a Worker, a callable returning one Worker or a list (one per task queue), or
    ``"module:attr"``; default ``SYNC_WORKER_FACTORY``. ``concurrency``: activity slots per
    worker (default ``SYNC_WORKER_CONCURRENCY``; else a factory with an optional ``concurrency``
    parameter decides, and every other gets 4: see :mod:`sync_worker.embed.factory`).
    ``pool``: ``threads`` or ``gevent`` (default: gevent in a gevent-patched process, e.g. a
    gunicorn gevent worker). With
    ``one_per_host`` (default ``SYNC_WORKER_ONE_PER_HOST``) only the process holding the file
    lock ``lock_path`` runs workers; the others stand by and take over when it exits.
    ``restart_failed`` rebuilds a worker whose run failed (registration refused, a poller
    died), with exponential back-off up to a minute.
    """
    pid = os.getpid()
    if pid in _forking_parents:
        raise EmbedError(
            f"not starting embedded workers in process {pid}: it is {_forking_parents[pid]}, which forks web "
            "workers afterwards and threads do not survive a fork. Start them in each web worker after the "
            "fork instead (sync_worker.embed.gunicorn / sync_worker.embed.uwsgi hooks)")
    settings = read_settings(require_factory=factory is None)
    chosen_factory: FactorySpec = factory if factory is not None else settings.factory
    slots = settings.concurrency if concurrency is None else int(concurrency)
    if slots is not None and slots < 1:
        raise EmbedConfigError(f"concurrency must be at least 1, not {concurrency!r}")
    try:
        chosen_pool = check_pool(pool or default_pool())
    except ValueError as error:
        raise EmbedConfigError(str(error)) from error
    use_lock = settings.one_per_host if one_per_host is None else bool(one_per_host)
    host_lock: Optional[HostLock] = None
    if use_lock:
        path = lock_path or settings.lock_file or default_lock_path(
            f"{chosen_factory!r}|{os.environ.get(SERVER_URL_ENV, '')}")
        host_lock = HostLock(path)
    with _lock:
        _ensure_not_running(_handles.get(pid))
        handle = EmbeddedWorkers(chosen_factory, concurrency=slots, pool=chosen_pool,
                                 client_factory=client_factory or client_from_environment, host_lock=host_lock,
                                 standby_retry_seconds=standby_retry_seconds, restart_failed=restart_failed)
        handle._launch()
        _handles[pid] = handle
    return handle


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # the parent's may have been held at the fork
    inherited: Set[EmbeddedWorkers] = set(_handles.values())
    for handle in inherited:
        handle._forget_after_fork()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
