"""The embedding settings, read once from a config namespace and the environment.

Each setting has one name, used both as an environment variable and as a variable of a
server config file (``gunicorn.conf.py``); the config file wins over the environment, as a
command-line flag would. The server itself comes from ``DURABLE_WORKFLOW_SERVER_URL``,
``DURABLE_WORKFLOW_AUTH_TOKEN`` and ``DURABLE_WORKFLOW_NAMESPACE`` (read as every door reads
them: :meth:`sync_worker.host.ClientOptions.from_env`), unless the factory builds its own Client.
``SYNC_WORKER_CONCURRENCY`` is the activity-slots variable of
:meth:`sync_worker.host.WorkerOptions.from_env` (here a whole number: one web process's slots).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from .errors import EmbedConfigError

__all__ = [
    "CONCURRENCY_ENV",
    "DEFAULT_CONCURRENCY",
    "FACTORY_ENV",
    "LOCK_FILE_ENV",
    "ONE_PER_HOST_ENV",
    "EmbedSettings",
    "read_settings",
]

FACTORY_ENV = "SYNC_WORKER_FACTORY"
CONCURRENCY_ENV = "SYNC_WORKER_CONCURRENCY"
ONE_PER_HOST_ENV = "SYNC_WORKER_ONE_PER_HOST"
LOCK_FILE_ENV = "SYNC_WORKER_LOCK_FILE"

#: Activity slots per embedded worker unless asked otherwise: a web server runs one embedded
#: worker per web process, so 16 processes x 4 slots is already 64 concurrent activities.
DEFAULT_CONCURRENCY = 4

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class EmbedSettings:
    factory: Any
    #: None when neither the config file nor the environment names it (see ``build_workers``).
    concurrency: Optional[int]
    one_per_host: bool
    lock_file: Optional[str]


def _pick(name: str, config: Mapping[str, Any], environ: Mapping[str, str]) -> Any:
    if name in config and config[name] is not None:
        return config[name]
    return environ.get(name)


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise EmbedConfigError(f"{name} must be a boolean (1/0, true/false), not {value!r}")


def read_settings(
    config: Optional[Mapping[str, Any]] = None, environ: Optional[Mapping[str, str]] = None,
    *, require_factory: bool = True,
) -> EmbedSettings:
    """The settings from ``config`` (a config file's variables), else ``environ``."""
    cfg: Mapping[str, Any] = config or {}
    env: Mapping[str, str] = os.environ if environ is None else environ
    factory = _pick(FACTORY_ENV, cfg, env)
    if require_factory and not factory:
        raise EmbedConfigError(f"no worker factory: set {FACTORY_ENV}=module:attr in the environment or in the "
                               "server's config file")
    raw_concurrency = _pick(CONCURRENCY_ENV, cfg, env)
    try:
        concurrency = None if raw_concurrency in (None, "") else int(raw_concurrency)
    except (TypeError, ValueError):
        raise EmbedConfigError(f"{CONCURRENCY_ENV} must be a positive integer, not {raw_concurrency!r}") from None
    if concurrency is not None and concurrency < 1:
        raise EmbedConfigError(f"{CONCURRENCY_ENV} must be a positive integer, not {raw_concurrency!r}")
    one_per_host = _as_bool(ONE_PER_HOST_ENV, _pick(ONE_PER_HOST_ENV, cfg, env) or "")
    lock_file = _pick(LOCK_FILE_ENV, cfg, env) or None
    return EmbedSettings(factory=factory, concurrency=concurrency, one_per_host=one_per_host,
                         lock_file=str(lock_file) if lock_file else None)
