"""The host: one set of options, one worker group and one ``serve()`` for every door.

Every way of running workers -- ``sync-worker run``, ``manage.py durable_worker``,
``sync-worker celery ... worker``, ``sync-worker nestjs``, the workers embedded in a web
process -- is an adapter onto these pieces:

* :class:`WorkerOptions` / :class:`ClientOptions`: the Worker's keywords and the Client's
  connection, validated, read from keyword arguments, a settings mapping (Django's
  ``SYNC_WORKER``, Celery's config) or the environment (:mod:`~sync_worker.host.options`,
  :mod:`~sync_worker.host.client_options`);
* :class:`WorkerGroup`: several runtimes of one process run and stopped as one
  (:mod:`~sync_worker.host.group`);
* :func:`serve`: a runtime (or a group) in the foreground, signals to warm/cold stops, the exit
  codes of :mod:`~sync_worker.host.exits` (:mod:`~sync_worker.host.serve`);
* :mod:`sync_worker.host.prefork`: ``-P prefork``, the same runtimes served in N child processes
  under a supervising parent (docs/pools.md).

A runtime is anything with the :class:`Runtime` surface: :class:`sync_worker.Worker` and
:class:`sync_worker.nestjs.NestjsWorker` are. See docs/runtime.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, List

from .client_options import ClientOptions
from .errors import OptionsError, UnknownOption
from .exits import EXIT_COLD_STOP, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE, exit_code
from .protocols import Runtime, Servable
from .serve import ServeMessages, ShutdownFlags, serve

#: name -> module of this package, imported on first use: they load the worker runtime, which
#: reading ClientOptions (the operator commands, a Celery app in a web process) does not need.
_LAZY = {
    "WorkerGroup": "group",
    "combined_error": "group",
    "WorkerOptions": "options",
}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .group import WorkerGroup, combined_error
    from .options import WorkerOptions

__all__ = [
    "EXIT_COLD_STOP",
    "EXIT_FAILED",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "EXIT_USAGE",
    "ClientOptions",
    "OptionsError",
    "Runtime",
    "Servable",
    "ServeMessages",
    "ShutdownFlags",
    "UnknownOption",
    "WorkerGroup",
    "WorkerOptions",
    "combined_error",
    "exit_code",
    "serve",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sync_worker.host' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted([*globals(), *_LAZY])
