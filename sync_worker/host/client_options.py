"""``ClientOptions``: how to reach the server, from keyword arguments, settings or the environment.

Environment → :class:`~sync_worker.Client` is written here once; every door reads it this way
(``sync-worker run``, the operator commands, the Celery app and CLI, the embedded workers,
``sync_worker_django``):

==============================  ======================  ===========================================
environment variable            field                   settings names
==============================  ======================  ===========================================
``DURABLE_WORKFLOW_SERVER_URL``  ``server_url``          ``SERVER_URL``, ``durable_workflow_server_url``
``DURABLE_WORKFLOW_AUTH_TOKEN``  ``token``               ``TOKEN``, ``durable_workflow_auth_token``
``DURABLE_WORKFLOW_NAMESPACE``   ``namespace``           ``NAMESPACE``, ``durable_workflow_namespace``
``SYNC_WORKER_REQUEST_TIMEOUT``  ``timeout``             ``REQUEST_TIMEOUT``
``SYNC_WORKER_CONNECT_TIMEOUT``  ``connect_timeout``     ``CONNECT_TIMEOUT``
(none)                          ``control_token``       ``CONTROL_TOKEN``
(none)                          ``worker_token``        ``WORKER_TOKEN``
(none)                          ``transport_retries``   ``TRANSPORT_RETRIES``
``SYNC_WORKER_EXTERNAL_STORAGE``  ``external_storage``  ``EXTERNAL_STORAGE``
``SYNC_WORKER_EXTERNAL_STORAGE_THRESHOLD_BYTES``  ``external_storage_threshold_bytes``
                                                        ``EXTERNAL_STORAGE_THRESHOLD_BYTES``
==============================  ======================  ===========================================

``external_storage`` is a driver, or a URI naming one (``file:///shared/payloads``, a directory,
``s3://bucket/prefix``); see docs/external-storage.md.

An empty variable counts as unset. ``server_url`` may stay None while options are gathered;
:meth:`ClientOptions.build_client` needs it.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Mapping, Optional, Type, TypeVar, overload

from . import values
from .errors import OptionsError
from .optionbase import OptionsBase

if TYPE_CHECKING:  # pragma: no cover
    from ..client import Client

__all__ = [
    "AUTH_TOKEN_ENV",
    "CONNECT_TIMEOUT_ENV",
    "ClientOptions",
    "DEFAULT_SERVER_URL",
    "NAMESPACE_ENV",
    "REQUEST_TIMEOUT_ENV",
    "SERVER_URL_ENV",
]

SERVER_URL_ENV = "DURABLE_WORKFLOW_SERVER_URL"
AUTH_TOKEN_ENV = "DURABLE_WORKFLOW_AUTH_TOKEN"
NAMESPACE_ENV = "DURABLE_WORKFLOW_NAMESPACE"
REQUEST_TIMEOUT_ENV = "SYNC_WORKER_REQUEST_TIMEOUT"
CONNECT_TIMEOUT_ENV = "SYNC_WORKER_CONNECT_TIMEOUT"
#: The server every command uses when none is given: the Durable Workflow CLI's default, and where
#: ``sync-worker devserver`` listens. One rule for every ``sync-worker`` command (issue 27).
DEFAULT_SERVER_URL = "http://127.0.0.1:7233"

C = TypeVar("C", bound="Client")


@dataclass(frozen=True)
class ClientOptions(OptionsBase):
    """The server, credentials, namespace and timeouts of a :class:`~sync_worker.Client`."""

    server_url: Optional[str] = None
    token: Optional[str] = None
    control_token: Optional[str] = None
    worker_token: Optional[str] = None
    namespace: str = "default"
    timeout: float = 60.0
    connect_timeout: float = 10.0
    transport_retries: int = 3
    external_storage: Any = None
    external_storage_threshold_bytes: Optional[int] = None

    RULES = {
        "server_url": values.server_url,
        "token": values.optional_secret,
        "control_token": values.optional_secret,
        "worker_token": values.optional_secret,
        "namespace": values.name,
        "timeout": values.positive_seconds,
        "connect_timeout": values.positive_seconds,
        "transport_retries": values.non_negative_int,
        "external_storage": values.external_storage,
        "external_storage_threshold_bytes": values.optional_positive_int,
    }
    SETTING_NAMES: ClassVar[Mapping[str, str]] = {
        "SERVER_URL": "server_url",
        "TOKEN": "token",
        "AUTH_TOKEN": "token",
        "CONTROL_TOKEN": "control_token",
        "WORKER_TOKEN": "worker_token",
        "NAMESPACE": "namespace",
        "REQUEST_TIMEOUT": "timeout",
        "CONNECT_TIMEOUT": "connect_timeout",
        "TRANSPORT_RETRIES": "transport_retries",
        "EXTERNAL_STORAGE": "external_storage",
        "EXTERNAL_STORAGE_THRESHOLD_BYTES": "external_storage_threshold_bytes",
        # Celery's settings (``CELERY_DURABLE_WORKFLOW_*`` in Django)
        "durable_workflow_server_url": "server_url",
        "durable_workflow_auth_token": "token",
        "durable_workflow_namespace": "namespace",
    }
    ENVIRONMENT: ClassVar[Mapping[str, str]] = {
        SERVER_URL_ENV: "server_url",
        AUTH_TOKEN_ENV: "token",
        NAMESPACE_ENV: "namespace",
        REQUEST_TIMEOUT_ENV: "timeout",
        CONNECT_TIMEOUT_ENV: "connect_timeout",
        "SYNC_WORKER_EXTERNAL_STORAGE": "external_storage",
        "SYNC_WORKER_EXTERNAL_STORAGE_THRESHOLD_BYTES": "external_storage_threshold_bytes",
    }

    def or_default_server(self) -> ClientOptions:
        """These options, with :data:`DEFAULT_SERVER_URL` when no server URL was given (logged at INFO
        so the start-up output says where the worker connects and why)."""
        if self.server_url is not None:
            return self
        logging.getLogger("sync_worker.host").info(
            "no server URL given (--server-url or %s): using %s", SERVER_URL_ENV, DEFAULT_SERVER_URL)
        return dataclasses.replace(self, server_url=DEFAULT_SERVER_URL)

    def client_kwargs(self) -> Dict[str, Any]:
        """The keyword arguments of ``Client(server_url, **...)``."""
        kwargs = self.as_dict()
        del kwargs["server_url"]
        for key in ("external_storage", "external_storage_threshold_bytes"):
            if kwargs[key] is None:  # only when set: a client class without external storage still fits
                del kwargs[key]
        return kwargs

    @overload
    def build_client(self, client_class: None = None, **extra: Any) -> Client: ...

    @overload
    def build_client(self, client_class: Type[C], **extra: Any) -> C: ...

    def build_client(self, client_class: Optional[Type[Any]] = None, **extra: Any) -> Any:
        """A new client (``client_class``, default :class:`~sync_worker.Client`) for these options;
        ``extra`` keywords go to its constructor. :class:`OptionsError` without a server URL."""
        if self.server_url is None:
            raise OptionsError("server_url", None, f"must be set: pass it, or set {SERVER_URL_ENV}",
                               show_value=False)
        if client_class is None:
            from ..client import Client

            client_class = Client
        return client_class(self.server_url, **{**self.client_kwargs(), **extra})
