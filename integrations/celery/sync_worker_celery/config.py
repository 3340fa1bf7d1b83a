"""``app.conf``: Celery's settings with their defaults, loaded the Celery ways.

``config_from_object("django.conf:settings", namespace="CELERY")`` reads every setting named
``CELERY_<NAME>`` as ``<name>`` (``CELERY_TASK_ALWAYS_EAGER`` → ``task_always_eager``);
without a namespace, lowercase names are read as they are and old-style uppercase ones
lowercased. The source is read lazily, on first use of ``app.conf``, as Celery does.

Besides Celery's names, three settings pick the Durable Workflow server (each falls back
to the environment variable every door reads, :class:`sync_worker.host.ClientOptions`):
``durable_workflow_server_url`` (``DURABLE_WORKFLOW_SERVER_URL``), ``durable_workflow_auth_token``
(``DURABLE_WORKFLOW_AUTH_TOKEN``), ``durable_workflow_namespace`` (``DURABLE_WORKFLOW_NAMESPACE``,
default ``"default"``). ``worker_concurrency`` is read as
:class:`sync_worker.host.WorkerOptions` reads it.
"""

from __future__ import annotations

import importlib
import os
import types
from typing import Any, Callable, Dict, Iterator, Mapping, MutableMapping, Optional, Tuple

__all__ = ["CLIENT_SETTINGS", "DEFAULTS", "Settings", "load_source"]

#: The settings that choose the server (names :class:`sync_worker.host.ClientOptions` reads).
CLIENT_SETTINGS = ("durable_workflow_server_url", "durable_workflow_auth_token", "durable_workflow_namespace")

DEFAULTS: Dict[str, Any] = {
    "task_always_eager": False,
    "task_eager_propagates": False,
    "task_store_eager_result": False,
    "task_default_queue": "celery",
    "task_routes": None,
    "task_annotations": None,
    "task_default_retry_delay": 180,
    "task_time_limit": None,
    "task_soft_time_limit": None,
    "task_acks_late": False,
    "task_track_started": False,
    "task_ignore_result": False,
    "task_serializer": "json",
    "result_serializer": "json",
    "accept_content": ["json"],
    "result_expires": 86400,
    "broker_url": None,
    "result_backend": None,
    "timezone": None,
    "enable_utc": True,
    "imports": (),
    "include": (),
    "beat_schedule": {},
    "worker_concurrency": None,
    "worker_prefetch_multiplier": 4,
    "worker_hijack_root_logger": True,
    "worker_disable_rate_limits": False,
    "task_default_rate_limit": None,
    #: A chord's link_error also goes to each header task (Celery's setting; the canvas honours it).
    "task_allow_error_cb_on_chord_header": False,
    "broker_transport_options": {},
    "result_backend_transport_options": {},
    "durable_workflow_server_url": None,
    "durable_workflow_auth_token": None,
    "durable_workflow_namespace": None,
    #: A running task heartbeats this often (seconds); the server declares its worker lost after
    #: three missed beats and retries it elsewhere. Also how fast revoke(terminate=True) is seen.
    #: 0 disables the heartbeat (then only time_limit, or a 24 h lease, bounds a lost attempt).
    "durable_workflow_heartbeat_interval": float(os.environ.get("DURABLE_WORKFLOW_HEARTBEAT_INTERVAL") or 10.0),
}

#: Celery settings that change nothing here; setting one logs a one-time notice saying why.
IGNORED_SETTINGS: Dict[str, str] = {
    "broker_url": "the Durable Workflow server is the broker",
    "result_backend": "the Durable Workflow server keeps results",
    "task_serializer": "payloads are always Avro Values", "result_serializer": "payloads are always Avro Values",
    "accept_content": "payloads are always Avro Values", "task_compression": "payloads are not compressed",
    "result_compression": "payloads are not compressed",
    "result_expires": "the server's history retention applies", "result_extended": "results are always extended",
    "task_acks_late": "tasks are always durable (acks late)",
    "task_acks_on_failure_or_timeout": "tasks are always durable",
    "task_reject_on_worker_lost": "an attempt lost with its worker always runs again",
    "task_ignore_result": "the server keeps every result",
    "task_store_errors_even_if_ignored": "the server keeps every error",
    "worker_prefetch_multiplier": "a worker leases only what its free slots can run",
    "worker_max_tasks_per_child": "there are no child processes",
    "worker_max_memory_per_child": "there are no child processes (see the memory admission gate)",
    "worker_send_task_events": "there is no event stream", "task_send_sent_event": "there is no event stream",
    "worker_hijack_root_logger": "the CLI configures logging", "enable_utc": "times are UTC on the wire",
    "task_queues": "queues exist when used; name them with -Q", "task_create_missing_queues": "queues always exist",
    "task_default_exchange": "there are no exchanges", "task_default_routing_key": "there are no routing keys",
    "task_default_exchange_type": "there are no exchanges",
    "broker_connection_retry_on_startup": "there is no broker", "broker_connection_retry": "there is no broker",
    "broker_pool_limit": "there is no broker", "broker_transport_options": "there is no broker",
    "broker_heartbeat": "there is no broker", "result_backend_transport_options": "there is no result backend",
    "beat_scheduler": "the server runs schedules", "beat_schedule_filename": "the server runs schedules",
    "worker_pool": "use -P threads|gevent", "worker_state_db": "the server keeps state",
}

#: Celery 3 setting names still seen in old projects, mapped to their new names.
_OLD_NAMES = {
    "always_eager": "task_always_eager",
    "eager_propagates_exceptions": "task_eager_propagates",
    "default_queue": "task_default_queue",
    "routes": "task_routes",
    "annotations": "task_annotations",
    "task_result_expires": "result_expires",
    "celerybeat_schedule": "beat_schedule",
    "celeryd_concurrency": "worker_concurrency",
    "celery_always_eager": "task_always_eager",
    "celery_eager_propagates_exceptions": "task_eager_propagates",
    "celery_default_queue": "task_default_queue",
    "celery_routes": "task_routes",
    "celery_result_backend": "result_backend",
    "celery_timezone": "timezone",
    "celery_imports": "imports",
}


def load_source(source: Any) -> Any:
    """``"pkg.module"`` or ``"pkg.module:attr"`` → that object; objects pass through."""
    if not isinstance(source, str):
        return source
    module_name, _, attribute = source.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in filter(None, attribute.split(".")):
        value = getattr(value, part)
    return value


def _items(obj: Any) -> Iterator[Tuple[Any, Any]]:
    if isinstance(obj, Mapping):
        yield from obj.items()
        return
    for name in dir(obj):
        if name.startswith("_"):
            continue
        try:
            value = getattr(obj, name)
        except Exception:  # a lazy settings object may refuse some names
            continue
        if isinstance(value, types.ModuleType) or (callable(value) and not isinstance(value, type) and name.islower()):
            continue
        yield name, value


class Settings(MutableMapping[str, Any]):
    """Celery settings: a mapping with attribute access (``app.conf.task_always_eager``)."""

    def __init__(self) -> None:
        object.__setattr__(self, "_values", dict(DEFAULTS))
        object.__setattr__(self, "_pending", [])

    # -- loading -------------------------------------------------------------------------------

    def add_source(self, source: Any, namespace: Optional[str], force: bool = False) -> None:
        self._pending.append((source, namespace))
        if force:
            self._load_pending()

    def _load_pending(self) -> None:
        pending = self._pending
        if not pending:
            return
        object.__setattr__(self, "_pending", [])
        for source, namespace in pending:
            self._values.update(self._read(load_source(source), namespace))

    @staticmethod
    def _read(obj: Any, namespace: Optional[str]) -> Dict[str, Any]:
        found: Dict[str, Any] = {}
        prefix = f"{namespace}_" if namespace else None
        for name, value in _items(obj):
            if not isinstance(name, str):
                continue
            if prefix is not None:
                if not name.startswith(prefix):
                    continue
                key = name[len(prefix):].lower()
            elif name.islower():
                key = name
            elif name.isupper():
                key = name.lower()
            else:
                continue
            found[_OLD_NAMES.get(key, key)] = value
        return found

    # -- mapping protocol ------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        self._load_pending()
        return self._values[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._load_pending()
        self._values[_OLD_NAMES.get(key.lower(), key.lower()) if key.isupper() else key] = value

    def __delitem__(self, key: str) -> None:
        self._load_pending()
        del self._values[key]

    def __iter__(self) -> Iterator[str]:
        self._load_pending()
        return iter(dict(self._values))

    def __len__(self) -> int:
        self._load_pending()
        return len(self._values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no setting {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __repr__(self) -> str:
        return f"<Settings {len(self)} keys>"

    def get_or(self, key: str, fallback: Callable[[], Any]) -> Any:
        value = self.get(key)
        return fallback() if value is None else value

    def humanize(self) -> str:
        return "\n".join(f"{k}: {v!r}" for k, v in sorted(self.items()))
