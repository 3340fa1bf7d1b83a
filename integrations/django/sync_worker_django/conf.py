"""The ``SYNC_WORKER`` settings dict, read lazily and validated in one place.

Nothing here is read at import time: :func:`get_config` reads ``django.conf.settings`` on
every call, so ``override_settings(SYNC_WORKER={...})`` in a test takes effect at once.

Precedence, highest first: explicit overrides (the management command's flags) > the
environment variables every door reads (:class:`sync_worker.host.ClientOptions`:
``DURABLE_WORKFLOW_SERVER_URL``, ``DURABLE_WORKFLOW_AUTH_TOKEN``, ``DURABLE_WORKFLOW_NAMESPACE``,
``SYNC_WORKER_REQUEST_TIMEOUT``) > ``settings.SYNC_WORKER`` > defaults (those of
:class:`sync_worker.host.WorkerOptions` and :class:`~sync_worker.host.ClientOptions`).

This module is the adapter from the settings dict to those options: each value is checked by
the host's rules (:mod:`sync_worker.host.values`, so a bad value reads as it does at every
other door), and :meth:`WorkerConfig.client_options` / :meth:`WorkerConfig.worker_options` hand
the result on.

:func:`problems` lists every misconfiguration as ``(check id, key, message)``; the system
checks (:mod:`sync_worker_django.checks`) report them with those ids, and
:func:`get_config` raises :class:`~django.core.exceptions.ImproperlyConfigured` naming the
first wrong key, so a worker never starts half-configured.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from sync_worker.host import ClientOptions, OptionsError, WorkerOptions
from sync_worker.host import values as rules
from sync_worker.host.client_options import AUTH_TOKEN_ENV, NAMESPACE_ENV, REQUEST_TIMEOUT_ENV, SERVER_URL_ENV

__all__ = [
    "DEFAULTS",
    "ENV_VARS",
    "KEYS",
    "QueueConfig",
    "command_overrides",
    "SETTINGS_NAME",
    "WorkerConfig",
    "get_config",
    "problems",
    "raw_settings",
    "set_command_overrides",
]

SETTINGS_NAME = "SYNC_WORKER"

#: Environment variables (those every door reads: ClientOptions.ENVIRONMENT) and the key each overrides.
_CLIENT_ENV = {field_name: variable for variable, field_name in ClientOptions.ENVIRONMENT.items()}
ENV_VARS = {
    "SERVER_URL": SERVER_URL_ENV,
    "TOKEN": AUTH_TOKEN_ENV,
    "NAMESPACE": NAMESPACE_ENV,
    "REQUEST_TIMEOUT": REQUEST_TIMEOUT_ENV,
    # the client's external storage (docs/external-storage.md), read by ClientOptions at every door
    "EXTERNAL_STORAGE": _CLIENT_ENV["external_storage"],
    "EXTERNAL_STORAGE_THRESHOLD_BYTES": _CLIENT_ENV["external_storage_threshold_bytes"],
}

_CLIENT = ClientOptions()
_WORKER = WorkerOptions()

DEFAULTS: Dict[str, Any] = {
    "SERVER_URL": _CLIENT.server_url,
    "TOKEN": _CLIENT.token,
    "CONTROL_TOKEN": _CLIENT.control_token,
    "WORKER_TOKEN": _CLIENT.worker_token,
    "NAMESPACE": _CLIENT.namespace,
    "TASK_QUEUES": ["default"],
    "POOL": _WORKER.pool,  # None: SYNC_WORKER_POOL, else gevent in a patched process, else threads
    "CONCURRENCY": _WORKER.max_concurrent_activity_tasks,
    "WORKFLOW_CONCURRENCY": _WORKER.max_concurrent_workflow_tasks,
    "ACTIVITY_POLLERS": _WORKER.max_concurrent_activity_task_polls,
    "WORKFLOW_POLLERS": _WORKER.max_concurrent_workflow_task_polls,
    "STICKY_CACHE_CAPACITY": _WORKER.sticky_cache_capacity,
    "MAX_CONCURRENT_WORKER_SESSIONS": _WORKER.max_concurrent_worker_sessions,  # docs/sessions.md
    "SHUTDOWN_TIMEOUT": _WORKER.shutdown_timeout,
    "POLL_TIMEOUT": _WORKER.poll_timeout,
    "HEARTBEAT_INTERVAL": _WORKER.heartbeat_interval,
    "BUILD_ID": _WORKER.build_id,
    "AUTODISCOVER_MODULES": ["workflows", "activities", "tasks"],
    "HEALTH_PORT": None,
    "REQUEST_TIMEOUT": _CLIENT.timeout,
    "LOG_FORMAT": None,  # None: SYNC_WORKER_LOG_FORMAT, else text (durable_worker --log-format)
    # a driver object or a file:// / s3:// URI or a directory; payloads over the threshold go there
    "EXTERNAL_STORAGE": _CLIENT.external_storage,
    "EXTERNAL_STORAGE_THRESHOLD_BYTES": _CLIENT.external_storage_threshold_bytes,
}

#: Every key the dict accepts (anything else is reported, so typos do not pass silently).
KEYS = tuple(DEFAULTS)

# check ids, one per kind of mistake (documented in docs/django.md)
E_NOT_A_DICT = "sync_worker.E001"
E_UNKNOWN_KEY = "sync_worker.E002"
E_SERVER_URL = "sync_worker.E003"
E_TOKEN = "sync_worker.E004"
E_NAMESPACE = "sync_worker.E005"
E_TASK_QUEUES = "sync_worker.E006"
E_POOL = "sync_worker.E007"
E_NUMBER = "sync_worker.E008"
E_MODULES = "sync_worker.E009"
E_HEALTH_PORT = "sync_worker.E010"
E_LOG_FORMAT = "sync_worker.E011"
E_EXTERNAL_STORAGE = "sync_worker.E012"
#: A warning, not an error: ``migrate`` or ``collectstatic`` in an image build must not fail
#: because the URL only arrives at run time (DURABLE_WORKFLOW_SERVER_URL); a worker still refuses.
W_NO_SERVER_URL = "sync_worker.W002"

#: The keys checked by one of the host's rules, with the check id a mistake in each reports.
_RULES: Dict[str, Tuple[str, rules.Rule]] = {
    "SERVER_URL": (E_SERVER_URL, rules.server_url),
    "TOKEN": (E_TOKEN, rules.optional_secret),
    "CONTROL_TOKEN": (E_TOKEN, rules.optional_secret),
    "WORKER_TOKEN": (E_TOKEN, rules.optional_secret),
    "BUILD_ID": (E_TOKEN, rules.optional_secret),
    "NAMESPACE": (E_NAMESPACE, rules.name),
    "POOL": (E_POOL, rules.pool_name),
    "CONCURRENCY": (E_NUMBER, rules.positive_int),
    "WORKFLOW_CONCURRENCY": (E_NUMBER, rules.positive_int),
    "ACTIVITY_POLLERS": (E_NUMBER, rules.positive_int),
    "WORKFLOW_POLLERS": (E_NUMBER, rules.positive_int),
    "STICKY_CACHE_CAPACITY": (E_NUMBER, rules.optional_non_negative_int),
    "MAX_CONCURRENT_WORKER_SESSIONS": (E_NUMBER, rules.positive_int),
    "SHUTDOWN_TIMEOUT": (E_NUMBER, rules.non_negative_seconds),
    "POLL_TIMEOUT": (E_NUMBER, rules.non_negative_seconds),
    "HEARTBEAT_INTERVAL": (E_NUMBER, rules.positive_seconds),
    "REQUEST_TIMEOUT": (E_NUMBER, rules.positive_seconds),
    "LOG_FORMAT": (E_LOG_FORMAT, lambda value, from_text: _log_format(value)),
    "EXTERNAL_STORAGE": (E_EXTERNAL_STORAGE, rules.external_storage),
    "EXTERNAL_STORAGE_THRESHOLD_BYTES": (E_NUMBER, rules.optional_positive_int),
}
#: Keys whose environment variable is text the rule parses (a URI, a number of bytes).
_FROM_TEXT = ("EXTERNAL_STORAGE", "EXTERNAL_STORAGE_THRESHOLD_BYTES")


def _log_format(value: Any) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, str) or value.strip().lower() not in ("text", "json"):
        raise rules.Invalid("must be 'text' or 'json'")
    return value.strip().lower()
_QUEUE_KEYS = ("NAME", "CONCURRENCY", "WORKFLOW_CONCURRENCY")


@dataclass(frozen=True)
class QueueConfig:
    """One ``TASK_QUEUES`` entry: the queue and its slot counts."""

    name: str
    concurrency: int
    workflow_concurrency: int


@dataclass(frozen=True)
class WorkerConfig:
    """The resolved configuration (settings, environment and overrides merged, validated)."""

    server_url: Optional[str]
    token: Optional[str]
    control_token: Optional[str]
    worker_token: Optional[str]
    namespace: str
    task_queues: Tuple[QueueConfig, ...]
    pool: Optional[str]
    shutdown_timeout: float
    poll_timeout: float
    heartbeat_interval: float
    build_id: Optional[str]
    autodiscover_modules: Tuple[str, ...]
    health_port: Optional[int]
    request_timeout: float
    activity_pollers: int = 1
    workflow_pollers: int = 1
    sticky_cache_capacity: Optional[int] = None
    max_concurrent_worker_sessions: int = _WORKER.max_concurrent_worker_sessions
    external_storage: Any = None
    external_storage_threshold_bytes: Optional[int] = None
    sources: Dict[str, str] = field(default_factory=dict, compare=False)

    def queue(self, name: str) -> Optional[QueueConfig]:
        for queue in self.task_queues:
            if queue.name == name:
                return queue
        return None

    def client_options(self) -> ClientOptions:
        """The server, credentials, timeout and external storage as :class:`sync_worker.host.ClientOptions`."""
        return ClientOptions(server_url=self.server_url, token=self.token, control_token=self.control_token,
                             worker_token=self.worker_token, namespace=self.namespace, timeout=self.request_timeout,
                             external_storage=self.external_storage,
                             external_storage_threshold_bytes=self.external_storage_threshold_bytes)

    def worker_options(self, queue: QueueConfig) -> WorkerOptions:
        """The options of ``queue``'s worker (slots, pollers, timeouts, pool)."""
        return WorkerOptions(
            task_queue=queue.name, build_id=self.build_id, poll_timeout=self.poll_timeout,
            max_concurrent_workflow_tasks=queue.workflow_concurrency, max_concurrent_activity_tasks=queue.concurrency,
            max_concurrent_workflow_task_polls=self.workflow_pollers,
            max_concurrent_activity_task_polls=self.activity_pollers, shutdown_timeout=self.shutdown_timeout,
            heartbeat_interval=self.heartbeat_interval, pool=self.pool,
            sticky_cache_capacity=self.sticky_cache_capacity,
            max_concurrent_worker_sessions=self.max_concurrent_worker_sessions)


def raw_settings() -> Any:
    """``settings.SYNC_WORKER`` as written (``{}`` when absent), read now."""
    from django.conf import settings

    return getattr(settings, SETTINGS_NAME, {})


def _merged(overrides: Optional[Mapping[str, Any]], environ: Optional[Mapping[str, str]]
            ) -> Tuple[Dict[str, Any], Dict[str, str], List[Tuple[str, str, str]]]:
    found: List[Tuple[str, str, str]] = []
    raw = raw_settings()
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        found.append((E_NOT_A_DICT, SETTINGS_NAME,
                      f"settings.{SETTINGS_NAME} must be a dict, not {type(raw).__name__}"))
        raw = {}
    for key in raw:
        if key not in DEFAULTS:
            found.append((E_UNKNOWN_KEY, str(key),
                          f"settings.{SETTINGS_NAME} has an unknown key {key!r}; known keys: {', '.join(KEYS)}"))
    merged = dict(DEFAULTS)
    sources = {key: "default" for key in DEFAULTS}
    for key, value in raw.items():
        if key in DEFAULTS:
            merged[key] = value
            sources[key] = f"settings.{SETTINGS_NAME}[{key!r}]"
    env = os.environ if environ is None else environ
    for key, variable in ENV_VARS.items():
        value = env.get(variable)
        if value:
            merged[key] = value
            sources[key] = f"environment variable {variable}"
    for key, value in (overrides or {}).items():
        if key not in DEFAULTS:
            raise KeyError(f"unknown {SETTINGS_NAME} key {key!r}")
        if value is None:
            continue
        if key == "TASK_QUEUES":
            value = _select_queues(value, merged["TASK_QUEUES"])
        merged[key] = value
        sources[key] = "command line"
    return merged, sources, found


def _select_queues(names: Any, configured: Any) -> Any:
    """``-Q a,b``: keep the settings' per-queue dict of a named queue, else the bare name."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    if not isinstance(names, (list, tuple)):
        return names
    by_name = {}
    if isinstance(configured, (list, tuple)):
        by_name = {e.get("NAME"): e for e in configured if isinstance(e, Mapping)}
    return [by_name.get(name, name) if isinstance(name, str) else name for name in names]


def _queue_problems(value: Any, where: str) -> List[Tuple[str, str, str]]:
    found: List[Tuple[str, str, str]] = []
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        return [(E_TASK_QUEUES, "TASK_QUEUES",
                 f"TASK_QUEUES ({where}) must be a non-empty list of queue names or dicts, got {value!r}")]
    names: List[str] = []
    for index, entry in enumerate(value):
        if isinstance(entry, Mapping):
            extra = [k for k in entry if k not in _QUEUE_KEYS]
            if extra:
                found.append((E_TASK_QUEUES, "TASK_QUEUES",
                              f"TASK_QUEUES[{index}] has unknown keys {extra}; use {', '.join(_QUEUE_KEYS)}"))
            name = entry.get("NAME")
            for key in ("CONCURRENCY", "WORKFLOW_CONCURRENCY"):
                if key in entry and not _is_positive_int(entry[key]):
                    found.append((E_TASK_QUEUES, "TASK_QUEUES",
                                  f"TASK_QUEUES[{index}][{key!r}] must be a positive int, got {entry[key]!r}"))
        else:
            name = entry
        if not isinstance(name, str) or not name.strip():
            found.append((E_TASK_QUEUES, "TASK_QUEUES",
                          f"TASK_QUEUES[{index}] must name a queue (a non-empty string), got {name!r}"))
            continue
        if name in names:
            found.append((E_TASK_QUEUES, "TASK_QUEUES", f"TASK_QUEUES lists {name!r} twice"))
        names.append(name)
    return found


def _is_positive_int(value: Any) -> bool:
    try:
        rules.positive_int(value)
    except rules.Invalid:
        return False
    return True


def _checked(merged: Mapping[str, Any], sources: Mapping[str, str]
             ) -> Tuple[Dict[str, Any], List[Tuple[str, str, str]]]:
    """The merged values converted by the host's rules, and every problem as ``(check id, key, message)``."""
    found: List[Tuple[str, str, str]] = []
    converted = dict(merged)
    for key, (check_id, rule) in _RULES.items():
        if key == "SERVER_URL" and merged[key] in (None, ""):
            found.append((W_NO_SERVER_URL, "SERVER_URL",
                          f"SERVER_URL is not set: add it to settings.{SETTINGS_NAME} or set "
                          f"{ENV_VARS['SERVER_URL']} (for example 'http://127.0.0.1:7233')"))
            continue
        try:
            from_text = key in _FROM_TEXT and sources.get(key, "").startswith("environment variable")
            converted[key] = rule(merged[key], from_text)
        except rules.Invalid as invalid:
            error = OptionsError(key, merged[key], invalid.requirement, source=sources.get(key, "default"),
                                 show_value=invalid.show_value)
            found.append((check_id, key, str(error)))
    found += _queue_problems(merged["TASK_QUEUES"], sources.get("TASK_QUEUES", "default"))
    modules = merged["AUTODISCOVER_MODULES"]
    if isinstance(modules, str) or not isinstance(modules, (list, tuple)) or not all(
            isinstance(m, str) and m and m.replace("_", "a").replace(".", "a").isalnum() for m in modules):
        found.append((E_MODULES, "AUTODISCOVER_MODULES",
                      f"AUTODISCOVER_MODULES ({sources.get('AUTODISCOVER_MODULES', 'default')}) must be a list of "
                      f"module names such as ['workflows', 'activities'], got {modules!r}"))
    port = merged["HEALTH_PORT"]
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535):
        found.append((E_HEALTH_PORT, "HEALTH_PORT",
                      f"HEALTH_PORT ({sources.get('HEALTH_PORT', 'default')}) must be a port number (0-65535) or "
                      f"None, got {port!r}"))
    return converted, found


#: The running management command's flags, so its system checks judge what it will use.
_command_overrides: Dict[str, Any] = {}


def set_command_overrides(overrides: Mapping[str, Any]) -> None:
    """Called by ``durable_worker`` before Django runs its system checks."""
    _command_overrides.clear()
    _command_overrides.update({k: v for k, v in overrides.items() if v is not None})


def command_overrides() -> Dict[str, Any]:
    return dict(_command_overrides)


def problems(overrides: Optional[Mapping[str, Any]] = None,
             environ: Optional[Mapping[str, str]] = None) -> List[Tuple[str, str, str]]:
    """Every misconfiguration as ``(check id, key, message)``; empty when the config is usable."""
    merged, sources, found = _merged(overrides if overrides is not None else _command_overrides, environ)
    return found + _checked(merged, sources)[1]


def _queues(value: Sequence[Any], concurrency: int, workflow_concurrency: int,
            forced: Mapping[str, Any]) -> Tuple[QueueConfig, ...]:
    """One QueueConfig per entry; a per-queue count wins over the global one, a flag over both."""
    queues: List[QueueConfig] = []
    for entry in value:
        if isinstance(entry, Mapping):
            act = concurrency if forced.get("CONCURRENCY") else int(entry.get("CONCURRENCY", concurrency))
            wf = workflow_concurrency if forced.get("WORKFLOW_CONCURRENCY") else int(
                entry.get("WORKFLOW_CONCURRENCY", workflow_concurrency))
            queues.append(QueueConfig(str(entry["NAME"]), act, wf))
        else:
            queues.append(QueueConfig(str(entry), concurrency, workflow_concurrency))
    return tuple(queues)


def get_config(overrides: Optional[Mapping[str, Any]] = None,
               environ: Optional[Mapping[str, str]] = None) -> WorkerConfig:
    """The merged, validated configuration; ``ImproperlyConfigured`` names the first wrong key.

    ``overrides`` uses the settings keys (``{"TASK_QUEUES": ["shop"], "CONCURRENCY": 50}``);
    ``None`` values are ignored, so a command can pass every flag through unchanged.
    """
    from django.core.exceptions import ImproperlyConfigured

    merged, sources, found = _merged(overrides, environ)
    merged, problems_found = _checked(merged, sources)
    found += problems_found
    if found:
        check_id, key, message = found[0]
        more = f" (and {len(found) - 1} more problem(s); run 'manage.py check')" if len(found) > 1 else ""
        raise ImproperlyConfigured(f"{SETTINGS_NAME}[{key!r}]: {message} [{check_id}]{more}")
    concurrency = int(merged["CONCURRENCY"])
    workflow_concurrency = int(merged["WORKFLOW_CONCURRENCY"])
    return WorkerConfig(
        server_url=str(merged["SERVER_URL"]),
        token=merged["TOKEN"],
        control_token=merged["CONTROL_TOKEN"],
        worker_token=merged["WORKER_TOKEN"],
        namespace=str(merged["NAMESPACE"]),
        task_queues=_queues(merged["TASK_QUEUES"], concurrency, workflow_concurrency, overrides or {}),
        pool=merged["POOL"],
        shutdown_timeout=float(merged["SHUTDOWN_TIMEOUT"]),
        poll_timeout=float(merged["POLL_TIMEOUT"]),
        heartbeat_interval=float(merged["HEARTBEAT_INTERVAL"]),
        build_id=merged["BUILD_ID"],
        autodiscover_modules=tuple(merged["AUTODISCOVER_MODULES"]),
        health_port=merged["HEALTH_PORT"],
        request_timeout=float(merged["REQUEST_TIMEOUT"]),
        activity_pollers=int(merged["ACTIVITY_POLLERS"]),
        workflow_pollers=int(merged["WORKFLOW_POLLERS"]),
        sticky_cache_capacity=(None if merged["STICKY_CACHE_CAPACITY"] is None
                               else int(merged["STICKY_CACHE_CAPACITY"])),
        max_concurrent_worker_sessions=int(merged["MAX_CONCURRENT_WORKER_SESSIONS"]),
        external_storage=merged["EXTERNAL_STORAGE"],
        external_storage_threshold_bytes=merged["EXTERNAL_STORAGE_THRESHOLD_BYTES"],
        sources=sources,
    )
