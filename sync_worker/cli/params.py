"""The flags the worker commands share, spelled once.

``sync-worker run``, ``sync-worker celery``, ``sync-worker nestjs`` and the operator commands
take their connection and logging flags from here, so each flag has one documented spelling
(older spellings stay as aliases):

* ``--server-url URL`` (alias ``--server``; the operator commands also ``-s``), ``--token``,
  ``--namespace``: each falls back to its ``DURABLE_WORKFLOW_*`` variable, read by
  :meth:`sync_worker.host.ClientOptions.from_env` (never by click, so the environment is read
  in one place and a flag given on the command line is known as such);
* ``-l/--loglevel`` (alias ``--log-level``) and ``--log-format text|json`` (env
  ``SYNC_WORKER_LOG_FORMAT``; json: one object per line with the task's ids,
  :mod:`sync_worker.runtime.log_context`);
* ``-c/--concurrency N|adaptive`` and ``--autoscale MAX,MIN`` (:class:`ConcurrencyParam`,
  :func:`autoscale_bounds`); ``-P/--pool`` (:func:`resolve_pool`, ``prefork`` where the door
  allows it) and the prefork pool's ``--max-tasks-per-child`` / ``--max-memory-per-child``
  (:func:`prefork_options`).

:func:`import_target` resolves the ``MODULE:ATTR`` argument of ``run`` and ``nestjs``.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any, Callable, Dict, List, Optional, TypeVar

import click

from ..host.client_options import AUTH_TOKEN_ENV, NAMESPACE_ENV, SERVER_URL_ENV

__all__ = [
    "PREFORK",
    "ConcurrencyParam",
    "autoscale_bounds",
    "configure_logging",
    "import_target",
    "log_format_option",
    "loglevel_option",
    "namespace_option",
    "prefork_options",
    "resolve_pool",
    "server_url_option",
    "token_option",
]

F = TypeVar("F", bound=Callable[..., Any])

def server_url_option(*, short: bool = False, help: Optional[str] = None) -> Callable[[F], F]:
    """``--server-url URL`` (alias ``--server``, and ``-s`` with ``short``); the parameter is ``server_url``."""
    names = ["--server-url", "--server", *(["-s"] if short else []), "server_url"]
    return click.option(*names, default=None, metavar="URL",
                        help=help or f"Server origin (env {SERVER_URL_ENV}); --server is an alias.")


def token_option(*, help: Optional[str] = None) -> Callable[[F], F]:
    """``--token TOKEN``; the parameter is ``token``."""
    return click.option("--token", default=None, help=help or f"Auth token (env {AUTH_TOKEN_ENV}).")


def namespace_option(*, help: Optional[str] = None) -> Callable[[F], F]:
    """``--namespace NS``; the parameter is ``namespace``."""
    return click.option("--namespace", default=None, help=help or f"Namespace (env {NAMESPACE_ENV}).")


LOG_FORMAT_ENV = "SYNC_WORKER_LOG_FORMAT"


def loglevel_option(*, default: str = "INFO", help: Optional[str] = None) -> Callable[[F], F]:
    """``-l/--loglevel LEVEL`` (alias ``--log-level``; the parameter is ``loglevel``) and ``--log-format``.

    ``--log-format text|json`` comes with it on every command (:func:`log_format_option`).
    """
    level = click.option("-l", "--loglevel", "--log-level", "loglevel", default=default, show_default=True,
                         help=help or "Logging level (DEBUG, INFO, WARNING, ERROR); the same -l/--loglevel on "
                                      "every command.")

    def both(fn: F) -> F:
        return level(log_format_option()(fn))

    return both


def _remember_log_format(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
    # Kept in the environment, where configure_logging reads it and where the processes a command
    # starts (the --reload child, a gevent re-exec) find it too.
    if value:
        os.environ[LOG_FORMAT_ENV] = value.lower()
    return value


def log_format_option() -> Callable[[F], F]:
    """``--log-format text|json`` (env ``SYNC_WORKER_LOG_FORMAT``), read by :func:`configure_logging`."""
    return click.option("--log-format", type=click.Choice(["text", "json"], case_sensitive=False), default=None,
                        envvar=LOG_FORMAT_ENV, show_envvar=True, expose_value=False, is_eager=True,
                        callback=_remember_log_format,
                        help="text (default; the per-task lines in Celery's wording) or json: one JSON object "
                             "per line with the task's ids.")


def configure_logging(loglevel: str, *, format: str = "%(asctime)s %(levelname)s %(name)s: %(message)s",
                      handlers: Optional[List[logging.Handler]] = None, log_format: Optional[str] = None) -> int:
    """Configure the root logger of a command's process at ``loglevel``; a usage error for an unknown level.

    ``log_format`` ``json`` (default: ``$SYNC_WORKER_LOG_FORMAT``, else text) prints one JSON object
    per line on every handler; text uses ``format``.
    """
    from ..runtime.log_context import formatter_for

    level = logging.getLevelName(str(loglevel).upper())
    if not isinstance(level, int):
        raise click.UsageError(f"unknown log level {loglevel!r}")
    try:
        formatter = formatter_for(log_format or os.environ.get(LOG_FORMAT_ENV), format)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    handlers = list(handlers) if handlers else [logging.StreamHandler()]
    for handler in handlers:
        handler.setFormatter(formatter)
    logging.basicConfig(level=level, handlers=handlers)
    return level


#: The ``-P`` name of the process pool (:mod:`sync_worker.host.prefork`); not a Worker pool.
PREFORK = "prefork"


def resolve_pool(pool: Optional[str], *, allow_prefork: bool = False) -> str:
    """The canonical pool for ``-P`` (default: the process's), checked for this process; a usage error if not.

    With ``allow_prefork``, ``prefork`` (or Celery's ``processes``) is :data:`PREFORK`.
    """
    from ..runtime.backend import check_pool, default_pool

    if allow_prefork and pool is not None and pool.strip().lower() in (PREFORK, "processes"):
        return PREFORK
    try:
        return check_pool(pool or default_pool())
    except (ValueError, RuntimeError) as error:
        raise click.UsageError(str(error)) from None


def prefork_options() -> Callable[[F], F]:
    """``--max-tasks-per-child N`` and ``--max-memory-per-child KIB`` (Celery's spellings and units)."""
    def decorate(function: F) -> F:
        function = click.option(
            "--max-memory-per-child", type=click.IntRange(min=1), default=None, metavar="KIB",
            help="-P prefork: replace a child once its resident set passes KIB kilobytes (checked after "
                 "each task, which finishes first).")(function)
        return click.option(
            "--max-tasks-per-child", type=click.IntRange(min=1), default=None, metavar="N",
            help="-P prefork: replace a child after it ran N activities.")(function)

    return decorate


class ConcurrencyParam(click.ParamType):  # type: ignore[type-arg,unused-ignore]  # generic only in click >= 8.2
    """``-c N`` (fixed slots) or ``-c adaptive``."""

    name = "N|adaptive"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip().lower()
            if text == "adaptive":
                return "adaptive"
            try:
                number = int(text)
            except ValueError:
                self.fail(f"{value!r} is neither a number of slots nor 'adaptive'", param, ctx)
        if number < 1:
            self.fail(f"{number} is not a valid number of slots (at least 1)", param, ctx)
        return number


def autoscale_bounds(value: Optional[str]) -> Optional[Dict[str, int]]:
    """Celery's ``--autoscale MAX,MIN`` (MIN optional, default 1) as adaptive bounds."""
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",")]
    try:
        numbers = [int(p) for p in parts if p]
    except ValueError:
        raise click.BadParameter(f"expected MAX[,MIN], got {value!r}", param_hint="--autoscale") from None
    if not numbers or len(numbers) > 2 or min(numbers) < 1:
        raise click.BadParameter(f"expected MAX[,MIN] with numbers of at least 1, got {value!r}",
                                 param_hint="--autoscale")
    maximum, minimum = (numbers[0], numbers[1] if len(numbers) == 2 else 1)
    if minimum > maximum:
        raise click.BadParameter(f"MIN {minimum} is above MAX {maximum}", param_hint="--autoscale")
    return {"max": maximum, "min": minimum}


def import_target(target: str) -> Any:
    """``MODULE:ATTR`` (``ATTR`` may be dotted) → that object; the current directory is importable."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise click.UsageError(f"expected MODULE:ATTR, got {target!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise click.UsageError(f"cannot import {module_name!r}: {error}") from None
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise click.UsageError(f"{module_name!r} has no attribute {attribute!r}") from None
    return value
