"""Turning a worker factory into Workers built in *this* process.

A factory is a ``Worker``, a callable returning a Worker or a sequence of Workers (one per
task queue), or the ``"module:attr"`` name of either. A callable receives, by parameter name,
any of ``client``, ``concurrency`` and ``pool`` that it declares. It is called after the fork,
in the process that runs the workers, so every Client and HTTP pool it builds belongs to that
process.

* ``client`` is built here from the ``DURABLE_WORKFLOW_*`` environment (as every door reads
  it: :meth:`sync_worker.host.ClientOptions.from_env`) when the parameter is required, or optional and
  ``DURABLE_WORKFLOW_SERVER_URL`` is set; an optional ``client`` is otherwise left to the
  factory (``sync_worker_django.workers:build_workers`` reads ``SYNC_WORKER["SERVER_URL"]``).
* Activity slots: an explicit concurrency (``start(concurrency=)``, ``SYNC_WORKER_CONCURRENCY``)
  is passed to the factory and applied to every worker. Without one, a factory that takes an
  *optional* ``concurrency`` decides itself (e.g. from its settings); any other factory gets
  :data:`~sync_worker.embed.settings.DEFAULT_CONCURRENCY` (4), small on purpose: every web
  process runs its own worker.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Sequence
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from ..host import ClientOptions, OptionsError
from ..host.client_options import AUTH_TOKEN_ENV, NAMESPACE_ENV, SERVER_URL_ENV
from ..worker import Worker
from .errors import EmbedConfigError
from .settings import DEFAULT_CONCURRENCY

__all__ = ["FactorySpec", "SERVER_URL_ENV", "build_workers", "client_from_environment", "resolve_factory"]

#: What :func:`sync_worker.embed.start` accepts as its factory.
FactorySpec = Union[str, Worker, Callable[..., Any]]


def resolve_factory(spec: FactorySpec) -> Union[Worker, Callable[..., Any]]:
    """The Worker or callable named by ``spec`` (imported when it is a ``"module:attr"`` string)."""
    if isinstance(spec, Worker) or (callable(spec) and not isinstance(spec, str)):
        return spec
    if not isinstance(spec, str):
        raise EmbedConfigError(f"a worker factory must be 'module:attr', a Worker or a callable, not {spec!r}")
    module_name, sep, attribute = spec.strip().partition(":")
    if not sep or not module_name or not attribute:
        raise EmbedConfigError(f"SYNC_WORKER_FACTORY must look like 'module:attr', got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise EmbedConfigError(f"cannot import worker factory module {module_name!r}: {error}") from error
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise EmbedConfigError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if not isinstance(value, Worker) and not callable(value):
        raise EmbedConfigError(f"{spec} is neither a Worker nor a factory returning Workers")
    return value  # type: ignore[no-any-return]


def client_from_environment(environ: Optional[Mapping[str, str]] = None) -> Any:
    """A Client for ``DURABLE_WORKFLOW_SERVER_URL`` / ``_AUTH_TOKEN`` / ``_NAMESPACE`` (:class:`ClientOptions`)."""
    try:
        options = ClientOptions.from_env(environ)
    except OptionsError as error:
        raise EmbedConfigError(str(error)) from error
    if options.server_url is None:
        raise EmbedConfigError(f"no server URL: set {SERVER_URL_ENV} (and {AUTH_TOKEN_ENV}, {NAMESPACE_ENV} "
                               "if the server needs them), or let the factory build its own Client")
    return options.build_client()


def build_workers(
    spec: FactorySpec,
    *,
    concurrency: Optional[int],
    pool: str,
    client_factory: Callable[[], Any] = client_from_environment,
    environ: Optional[Mapping[str, str]] = None,
) -> List[Worker]:
    """Call the factory in this process and check what it returned.

    Every worker runs on ``pool`` (a mismatch is a configuration error, not a silent switch);
    ``concurrency`` (None: not given explicitly) as the module docstring says. Task queues
    must be distinct.
    """
    env = os.environ if environ is None else environ
    target = resolve_factory(spec)
    slots: Optional[int] = concurrency
    if isinstance(target, Worker):
        produced: Any = target
        slots = DEFAULT_CONCURRENCY if slots is None else slots
    else:
        try:
            params: Mapping[str, inspect.Parameter] = inspect.signature(target).parameters
        except (TypeError, ValueError):
            params = {}
        kwargs: Dict[str, Any] = {}
        client_param = params.get("client")
        if client_param is not None and (_required(client_param) or env.get(SERVER_URL_ENV)):
            kwargs["client"] = client_factory()
        slots_param = params.get("concurrency")
        if slots is None and (slots_param is None or _required(slots_param)):
            slots = DEFAULT_CONCURRENCY
        if slots_param is not None and slots is not None:
            kwargs["concurrency"] = slots
        if "pool" in params:
            kwargs["pool"] = pool
        produced = target(**kwargs)
    workers = _as_workers(produced, spec)
    queues = [w.task_queue for w in workers]
    if len(set(queues)) != len(queues):
        raise EmbedConfigError(f"the worker factory returned two workers for one task queue: {queues}")
    for worker in workers:
        if worker.backend.name != pool:
            raise EmbedConfigError(
                f"the worker for task queue {worker.task_queue!r} runs on pool {worker.backend.name!r}, but this "
                f"process needs {pool!r} (a gevent web worker needs greenlets); leave Worker(pool=...) unset "
                "or let the factory accept a pool argument"
            )
        if slots is not None and worker.max_concurrent_activity_tasks != slots:
            worker.configure_activity_concurrency(slots)
    return workers


def _required(parameter: inspect.Parameter) -> bool:
    return parameter.default is inspect.Parameter.empty and parameter.kind not in (
        inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _as_workers(produced: Any, spec: FactorySpec) -> List[Worker]:
    if isinstance(produced, Worker):
        return [produced]
    if isinstance(produced, Sequence) and not isinstance(produced, (str, bytes)):
        items = list(produced)
        if items and all(isinstance(item, Worker) for item in items):
            return items
    raise EmbedConfigError(f"the worker factory {spec!r} returned {type(produced).__name__}, "
                           "not a Worker or a non-empty list of Workers")
