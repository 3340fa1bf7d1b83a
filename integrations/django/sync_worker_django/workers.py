"""Building the project's clients and workers from ``settings.SYNC_WORKER``.

The public factories (each sets Django up when needed, so they work from a plain process,
``sync-worker run``, or a gunicorn/uWSGI hook through ``SYNC_WORKER_FACTORY``):

* :func:`build_workers` -- one configured :class:`~sync_worker.Worker` per ``TASK_QUEUES``
  entry, after autodiscovery; the management command and the embedding hooks use it
  (``SYNC_WORKER_FACTORY=sync_worker_django.workers:build_workers``);
* :func:`build_worker` -- the one worker of one queue, the factory shape ``sync-worker run``
  accepts (``sync-worker run sync_worker_django.workers:build_worker -Q shop``);
* :func:`get_client` -- a :class:`DjangoClient` for the web side (start workflows, read
  results), which refuses model instances, datetimes and Decimals before sending.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from sync_worker import Client, Worker
from sync_worker.contrib import enable_for_initialized_tools

from .conf import WorkerConfig, get_config
from .db import DjangoTaskInterceptor
from .discovery import Discovered, autodiscover
from .values import check_wire_values

__all__ = ["DjangoClient", "build_client", "build_worker", "build_workers", "ensure_django", "get_client"]

logger = logging.getLogger("sync_worker.django")

_client_lock = threading.Lock()
_client_cache: Dict[Any, DjangoClient] = {}
_CLIENT_CACHE_SIZE = 4


def ensure_django() -> None:
    """``django.setup()`` once, when the app registry is not ready yet (a bare process)."""
    from django.apps import apps

    if apps.ready:
        return
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    if not settings.configured and not os.environ.get("DJANGO_SETTINGS_MODULE"):
        raise ImproperlyConfigured(
            "Django is not configured: set DJANGO_SETTINGS_MODULE (for example 'mysite.settings') "
            "before building sync_worker_django workers")
    import django

    django.setup()


class DjangoClient(Client):
    """A :class:`~sync_worker.Client` that refuses Django values before anything is sent.

    ``start_workflow`` (arguments, memo, search attributes), ``start_activity``, ``signal_workflow``,
    ``update_workflow`` and ``query_workflow`` check their arguments with
    :func:`~sync_worker_django.values.check_wire_values`: a model instance, ``datetime``,
    ``Decimal`` or ``UUID`` raises :class:`~sync_worker_django.values.DjangoValueNotAllowed`
    with its path and a hint ("pass the primary key").
    """

    def start_workflow(self, workflow_type: str, *args: Any, **kwargs: Any) -> Any:
        what = f"start_workflow({workflow_type!r})"
        check_wire_values(list(args) or list(kwargs.get("input") or []), what=what)
        for field in ("memo", "search_attributes"):
            if kwargs.get(field):
                check_wire_values(kwargs[field], what=what, role=field)
        return super().start_workflow(workflow_type, *args, **kwargs)

    def start_activity(self, activity_type: str, *args: Any, **kwargs: Any) -> Any:
        check_wire_values(list(args) or list(kwargs.get("input") or []), what=f"start_activity({activity_type!r})")
        return super().start_activity(activity_type, *args, **kwargs)

    def signal_workflow(self, workflow_id: str, signal_name: str, *, args: Optional[Sequence[Any]] = None,
                        **kwargs: Any) -> Any:
        check_wire_values(list(args or []), what=f"signal_workflow({workflow_id!r}, {signal_name!r})")
        return super().signal_workflow(workflow_id, signal_name, args=None if args is None else list(args), **kwargs)

    def update_workflow(self, workflow_id: str, update_name: str, *, args: Optional[Sequence[Any]] = None,
                        **kwargs: Any) -> Any:
        check_wire_values(list(args or []), what=f"update_workflow({workflow_id!r}, {update_name!r})")
        return super().update_workflow(workflow_id, update_name, args=None if args is None else list(args), **kwargs)

    def query_workflow(self, workflow_id: str, query_name: str, *, args: Optional[Sequence[Any]] = None,
                       **kwargs: Any) -> Any:
        check_wire_values(list(args or []), what=f"query_workflow({workflow_id!r}, {query_name!r})")
        return super().query_workflow(workflow_id, query_name, args=None if args is None else list(args), **kwargs)


def build_client(config: Optional[WorkerConfig] = None, **overrides: Any) -> DjangoClient:
    """A new client for ``config`` (default: the current settings, with ``overrides``)."""
    config = config if config is not None else get_config(overrides or None)
    return config.client_options().build_client(DjangoClient)


def get_client() -> DjangoClient:
    """A client for the current settings, shared by the process (rebuilt when the settings change)."""
    config = get_config()
    key = (config.server_url, config.token, config.control_token, config.worker_token, config.namespace,
           config.request_timeout)
    with _client_lock:
        client = _client_cache.pop(key, None)
        if client is None:
            client = build_client(config)
        _client_cache[key] = client  # most recently used last
        while len(_client_cache) > _CLIENT_CACHE_SIZE:  # settings changed (tests): drop the oldest pool
            _client_cache.pop(next(iter(_client_cache))).close()
        return client


def _task_activities(queue: str) -> List[Any]:
    from .task_registry import activities_for_queue

    return activities_for_queue(queue)


def build_workers(
    *,
    task_queues: Optional[Sequence[str]] = None,
    concurrency: Optional[int] = None,
    workflow_concurrency: Optional[int] = None,
    pool: Optional[str] = None,
    overrides: Optional[Mapping[str, Any]] = None,
    discovered: Optional[Discovered] = None,
    client: Optional[Any] = None,
    interceptors: Sequence[Any] = (),
) -> List[Worker]:
    """One :class:`~sync_worker.Worker` per configured task queue, ready to ``run()``.

    Sets Django up when needed, validates the settings (``ImproperlyConfigured`` names the
    wrong key), runs autodiscovery (unless ``discovered`` is given) and builds each worker
    with the discovered workflows, activities and ``django.tasks`` tasks of its queue, the
    database hygiene interceptor first, then ``interceptors``. Arguments override the
    settings (as the command's flags do); ``client`` (a :class:`~sync_worker.Client`) is
    cloned per worker instead of building one from the settings.
    """
    ensure_django()
    enable_for_initialized_tools()  # settings ran sentry_sdk.init(...): task failures reach Sentry too
    merged: Dict[str, Any] = dict(overrides or {})
    if task_queues:
        merged["TASK_QUEUES"] = list(task_queues)
    merged.setdefault("CONCURRENCY", concurrency)
    merged.setdefault("WORKFLOW_CONCURRENCY", workflow_concurrency)
    merged.setdefault("POOL", pool)
    if client is not None and getattr(client, "base_url", None):
        merged.setdefault("SERVER_URL", client.base_url)
    config = get_config(merged)
    found = discovered if discovered is not None else autodiscover(config.autodiscover_modules)
    workflows = found.workflow_classes()
    activities = found.activity_functions()
    workers: List[Worker] = []
    for queue in config.task_queues:
        queue_activities = activities + _task_activities(queue.name)
        if not workflows and not queue_activities:
            from django.core.exceptions import ImproperlyConfigured

            raise ImproperlyConfigured(
                f"task queue {queue.name!r} has nothing to run: no workflow or activity was found in the "
                f"{', '.join(config.autodiscover_modules)} modules of INSTALLED_APPS, and no django.tasks task "
                "uses this queue")
        worker_client = client.clone() if client is not None else build_client(config)
        options = config.worker_options(queue).replace(
            workflows=tuple(workflows), activities=tuple(queue_activities),
            interceptors=(DjangoTaskInterceptor(), *interceptors))
        workers.append(options.build(worker_client))
    logger.info("built %d worker(s) for task queue(s) %s on pool %s", len(workers),
                ", ".join(q.name for q in config.task_queues), workers[0].pool if workers else "-")
    return workers


def build_worker(
    *,
    task_queue: Optional[str] = None,
    concurrency: Optional[int] = None,
    pool: Optional[str] = None,
    client: Optional[Any] = None,
) -> Worker:
    """The worker of one queue (default: the first ``TASK_QUEUES`` entry); ``sync-worker run``'s factory shape."""
    queues: Union[List[str], None] = [task_queue] if task_queue else None
    if queues is None:
        ensure_django()
        queues = [get_config().task_queues[0].name]
    return build_workers(task_queues=queues, concurrency=concurrency, pool=pool, client=client)[0]
