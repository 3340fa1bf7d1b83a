"""Shared plumbing of :class:`sync_worker.Client`: configuration, headers, discovery, one call path.

The control-plane and worker-plane route methods live in their own modules as mixins over
this base; nothing else in the package builds a URL.
"""

from __future__ import annotations

import os
import re
import ssl
import threading
import time
from typing import Any, Dict, Mapping, Optional, Tuple
from urllib.parse import quote, urlsplit

from .. import errors
from ..cancel import CancelToken
from ..external_storage.wire import PayloadOffload
from ..instrumentation import ClientCall, observe_client_call
from ..protocol.versions import (
    CONTROL_PLANE_VERSION,
    CONTROL_PLANE_VERSION_HEADER,
    NAMESPACE_HEADER,
    PROTOCOL_VERSION_HEADER,
    WORKER_PROTOCOL_VERSION,
)
from .transport import POLL_ACCEPT, RetryMode, RetryPolicy, Transport, query_string

# metric names shared with the published SDK (and sync_worker.runtime.metrics)
CLIENT_REQUESTS = "durable_workflow_client_requests"
CLIENT_REQUEST_DURATION_SECONDS = "durable_workflow_client_request_duration_seconds"

PROTOCOL_VERSION = WORKER_PROTOCOL_VERSION
CONTROL_PLANE_CONTRACT_SCHEMA = "durable-workflow.v2.control-plane-request.contract"
SDK_VERSION = "sync-worker-python/0.1.0"

#: How worker-plane requests travel: ``"stdlib"`` (the default: pooled sockets with a lean HTTP/1.1
#: wire, standard library only) or ``"requests"`` (a session).
WORKER_PLANE_TRANSPORTS = ("stdlib", "requests")
#: How control-plane (and discovery) requests travel: ``"stdlib"`` (the default: the worker plane's
#: socket pool, a fraction of the CPU per call) or ``"requests"`` (a session: what ``responses``-based
#: tests need to see the calls).
CONTROL_PLANE_TRANSPORTS = ("stdlib", "requests")

_PROTOCOL_ENV = "DURABLE_WORKFLOW_WORKER_PROTOCOL_VERSION"
_CONTROL_ENV = "DURABLE_WORKFLOW_CONTROL_PLANE_VERSION"


#: A string ``quote(..., safe="")`` leaves as it is (its always-safe characters): most ids.
_URL_SAFE = re.compile(r"[A-Za-z0-9_.~-]+").fullmatch


def segment(value: str) -> str:
    """Percent-encode one path segment (ids are opaque; URL-safe ids pass unchanged)."""
    if type(value) is str and _URL_SAFE(value):
        return value
    return quote(str(value), safe="")


class ClientBase:
    """Configuration and the single request path shared by every route method."""

    def __init__(
        self,
        base_url: str,
        *,
        token: Optional[str] = None,
        control_token: Optional[str] = None,
        worker_token: Optional[str] = None,
        namespace: str = "default",
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        failure_report_limit_bytes: Optional[int] = None,
        max_connections: Optional[int] = None,
        transport_retries: int = 3,
        verify: Any = True,
        metrics: Any = None,
        tls_context: Optional[ssl.SSLContext] = None,
        max_body_bytes: int = 64 * 1024 * 1024,
        worker_plane_transport: str = "stdlib",
        control_plane_transport: str = "stdlib",
        external_storage: Any = None,
        external_storage_threshold_bytes: Optional[int] = None,
        external_storage_cache: Any = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"base_url must be an http(s) origin, got {base_url!r}")
        if parts.query or parts.fragment:
            raise ValueError("base_url must not carry a query string or fragment")
        if parts.path.rstrip("/").endswith("/api"):
            raise ValueError("base_url is the server origin; leave out the trailing /api")
        if failure_report_limit_bytes is not None and (
            not isinstance(failure_report_limit_bytes, int) or failure_report_limit_bytes <= 0
        ):
            raise ValueError("failure_report_limit_bytes must be a positive int")
        if not namespace:
            raise ValueError("namespace must be a non-empty string")
        self.base_url = base_url.rstrip("/")
        self.namespace = namespace
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.token = token
        self.control_token = control_token
        self.worker_token = worker_token
        self.failure_report_limit_bytes = failure_report_limit_bytes
        self.max_connections = int(max_connections) if max_connections else 64
        self.transport_retries = max(1, int(transport_retries))
        self.verify = verify
        self._offload: Optional[PayloadOffload] = None
        self._layered = False  # metrics or external storage wrap each request (kept by their setters)
        self.metrics = metrics  # a MetricsRecorder (increment/record), as the published SDK takes
        if tls_context is not None and not isinstance(tls_context, ssl.SSLContext):
            raise TypeError(f"tls_context must be an ssl.SSLContext, not {type(tls_context).__name__}")
        self.tls_context = tls_context  # used as given for every HTTPS connection (treat it as read-only)
        if not isinstance(max_body_bytes, int) or max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be a positive int")
        self.max_body_bytes = max_body_bytes
        if worker_plane_transport not in WORKER_PLANE_TRANSPORTS:
            raise ValueError(f"worker_plane_transport must be one of {', '.join(WORKER_PLANE_TRANSPORTS)}, "
                             f"not {worker_plane_transport!r}")
        self.worker_plane_transport = worker_plane_transport
        if control_plane_transport not in CONTROL_PLANE_TRANSPORTS:
            raise ValueError(f"control_plane_transport must be one of {', '.join(CONTROL_PLANE_TRANSPORTS)}, "
                             f"not {control_plane_transport!r}")
        self.control_plane_transport = control_plane_transport
        self._transport = Transport(
            self.base_url,
            timeout=self.timeout,
            connect_timeout=self.connect_timeout,
            max_connections=self.max_connections,
            retry=RetryPolicy(max_attempts=self.transport_retries),
            verify=verify,
            max_body_bytes=max_body_bytes,
            ssl_context=tls_context,
        )
        self._cluster_info: Optional[Dict[str, Any]] = None
        self._cluster_lock = threading.Lock()
        self._trace_context_probe_failed_at: Optional[float] = None
        self.configure_external_storage(external_storage, external_storage_threshold_bytes, external_storage_cache)

    def configure_external_storage(self, driver: Any, threshold_bytes: Optional[int] = None,
                                   cache: Any = None) -> None:
        """Store payloads above ``threshold_bytes`` through ``driver`` and read references with it.

        ``driver`` is an ``ExternalStorageDriver`` (``LocalFilesystemExternalStorage``,
        ``S3ExternalStorage``, ...); ``None`` turns it off (references then fail with
        ``ExternalPayloadUnsupported``). Without a threshold, references are read but nothing is
        offloaded. docs/external-storage.md.
        """
        if driver is None:
            if threshold_bytes is not None or cache is not None:
                raise ValueError("external_storage_threshold_bytes / external_storage_cache need external_storage")
            self._offload = None
        else:
            self._offload = PayloadOffload(driver, threshold_bytes, cache)
        self._layered = self._offload is not None or self._metrics is not None

    @property
    def metrics(self) -> Any:
        """The ``MetricsRecorder`` every request is counted and timed with (``None``: not measured)."""
        return self._metrics

    @metrics.setter
    def metrics(self, recorder: Any) -> None:
        self._metrics = recorder
        self._layered = self._offload is not None or recorder is not None

    @property
    def external_storage(self) -> Any:
        return self._offload.driver if self._offload is not None else None

    @property
    def external_storage_threshold_bytes(self) -> Optional[int]:
        return self._offload.threshold_bytes if self._offload is not None else None

    @property
    def external_storage_cache(self) -> Any:
        return self._offload.cache if self._offload is not None else None

    # -- lifecycle -------------------------------------------------------------------

    def clone(self, **overrides: Any) -> Any:
        """A new client with the same configuration and its own connection pool."""
        config: Dict[str, Any] = dict(
            token=self.token, control_token=self.control_token, worker_token=self.worker_token,
            namespace=self.namespace, timeout=self.timeout, connect_timeout=self.connect_timeout,
            failure_report_limit_bytes=self.failure_report_limit_bytes,
            max_connections=self.max_connections, transport_retries=self.transport_retries,
            verify=self.verify, metrics=self.metrics, tls_context=self.tls_context,
            max_body_bytes=self.max_body_bytes, worker_plane_transport=self.worker_plane_transport,
            control_plane_transport=self.control_plane_transport,
            external_storage=self.external_storage,
            external_storage_threshold_bytes=self.external_storage_threshold_bytes,
            external_storage_cache=self.external_storage_cache,
        )
        config.update(overrides)
        twin = type(self)(self.base_url, **config)
        twin._cluster_info = self._cluster_info
        return twin

    def ensure_pool_capacity(self, connections: int) -> None:
        """Grow the connection pool to at least ``connections`` concurrent requests.

        A worker calls this with pollers + slots + heartbeats, so a busy process never
        discards connections ("connection pool is full"). Never shrinks the pool.
        """
        self._transport.ensure_capacity(int(connections))
        self.max_connections = self._transport.max_connections

    def close(self) -> None:
        """Close pooled connections. The client stays usable (it reconnects on demand)."""
        self._transport.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:  # never show tokens
        return f"{type(self).__name__}({self.base_url!r}, namespace={self.namespace!r})"

    # -- headers -----------------------------------------------------------------------

    def _worker_headers(self) -> Dict[str, str]:
        token = self.worker_token or self.token
        if token is None and self.control_token is not None:
            raise ValueError("worker-plane calls need worker_token or token; only control_token is set")
        # The protocol-version override (DURABLE_WORKFLOW_WORKER_PROTOCOL_VERSION) is read at this
        # client's first worker-plane request and kept: a per-request os.environ lookup of an unset
        # variable raised and caught a KeyError inside os.environ on every poll and completion.
        version = self.__dict__.get("_worker_protocol_version")
        if version is None:
            version = self.__dict__["_worker_protocol_version"] = os.environ.get(_PROTOCOL_ENV) or PROTOCOL_VERSION
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            NAMESPACE_HEADER: self.namespace,
            PROTOCOL_VERSION_HEADER: version,
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _control_headers(self) -> Dict[str, str]:
        token = self.control_token or self.token
        if token is None and self.worker_token is not None:
            raise ValueError("control-plane calls need control_token or token; only worker_token is set")
        # DURABLE_WORKFLOW_CONTROL_PLANE_VERSION is read at this client's first control-plane request
        # and kept, as the worker plane's override is.
        version = self.__dict__.get("_control_plane_version")
        if version is None:
            version = self.__dict__["_control_plane_version"] = os.environ.get(_CONTROL_ENV) or CONTROL_PLANE_VERSION
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            NAMESPACE_HEADER: self.namespace,
            CONTROL_PLANE_VERSION_HEADER: version,
        }
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _headers(self, plane: str, poll: bool) -> Dict[str, str]:
        """The headers of a request on ``plane`` (a poll's ``Accept`` names the poll envelope).

        Built once per plane and kept while the credentials and namespace they carry stay the same
        (the client's attributes are read on every request: set them and the next request sends
        the new values). The dict is shared: never change it.
        """
        key = (self.token, self.control_token, self.worker_token, self.namespace)
        cache: Optional[Tuple[Tuple[Optional[str], ...], Dict[str, Dict[str, str]]]] = self.__dict__.get("_header_sets")
        if cache is None or cache[0] != key:
            cache = (key, {})
            self.__dict__["_header_sets"] = cache
        sets = cache[1]
        which = "poll" if poll and plane == "worker" else plane
        headers = sets.get(which)
        if headers is None:
            if plane == "worker":
                headers = self._worker_headers()
                if poll:
                    headers["Accept"] = POLL_ACCEPT
            else:
                # discovery prefers the worker credential, as the contract says
                headers = (self._worker_headers() if plane != "control" and self.worker_token
                           else self._control_headers())
            sets[which] = headers
        return headers

    # -- one request path --------------------------------------------------------------

    def _call(
        self,
        plane: str,
        method: str,
        path: str,
        *,
        route: str,
        body: Any = None,
        params: Optional[Mapping[str, Any]] = None,
        retry: RetryMode = RetryMode.SAFE,
        read_timeout: Optional[float] = None,
        cancel: Optional[CancelToken] = None,
        operation: str = "",
        poll: bool = False,
        raw: bool = False,
    ) -> Any:
        """The one request path: the plane's headers, then one transport request.

        External storage (``raw`` leaves it out) and metrics wrap the request only when one of
        them is configured: ``_layered`` is decided when they are set, so a client with neither
        (every worker by default: a poll and a report per task) pays one flag test for them.
        """
        headers = self._headers(plane, poll)
        if params:
            query = query_string(params)
            if query is not None:
                path = f"{path}?{query}"
        # Both planes go on the stdlib socket pool unless asked otherwise (requests: what
        # requests-level mocking sees).
        direct = (self.worker_plane_transport if plane == "worker" else self.control_plane_transport) == "stdlib"
        layered = self._layered
        offload = metrics = None
        started = 0.0
        if layered:
            offload = None if raw else self._offload
            if offload is not None:  # docs/external-storage.md: large blobs leave as references
                body = offload.outbound(body)
            metrics = self._metrics
            started = time.perf_counter()
        try:
            response = self._transport.request(
                method, "/api" + path, route=route, headers=headers, json_body=body,
                read_timeout=read_timeout, retry=retry, cancel=cancel, operation=operation, poll=poll,
                direct=direct,
            )
        except BaseException as exc:
            if metrics is not None:
                failed = isinstance(exc, Exception)
                self._record(metrics, method, route, plane, str(getattr(exc, "status", "") or "") if failed else "",
                             type(exc).__name__ if failed else "pending", started)
            raise
        if not layered:
            return response.body
        if metrics is not None:
            self._record(metrics, method, route, plane, str(response.status), "ok", started)
        if offload is None:
            return response.body
        return offload.inbound(response.body, defer_errors=plane == "worker")  # references come back as blobs

    @staticmethod
    def _record(metrics: Any, method: str, route: str, plane: str, status: str, outcome: str,
                started: float) -> None:
        tags = {"method": method.upper(), "route": route, "plane": plane, "status_code": status, "outcome": outcome}
        metrics.increment(CLIENT_REQUESTS, tags=tags)
        metrics.record(CLIENT_REQUEST_DURATION_SECONDS, time.perf_counter() - started, tags=tags)

    def request(self, method: str, path: str, *, body: Any = None, params: Optional[Mapping[str, Any]] = None,
                retry: RetryMode = RetryMode.CONNECT_ONLY, operation: str = "") -> Any:
        """One control-plane request with an exact JSON body (what ``sync-worker`` commands send).

        ``path`` is below ``/api`` (``"/workflows"``). The body goes as given: no payload encoding.
        Retries only when the connection was refused, unless ``retry`` says otherwise.
        """
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        return self._call("control", method.upper(), path, route=path, body=body, params=params, retry=retry,
                          operation=operation or f"cli.{method.lower()}", raw=True)

    # -- discovery -------------------------------------------------------------------------

    def health(self) -> Dict[str, Any]:
        """``GET /api/health``."""
        body = self._call("discovery", "GET", "/health", route="/health")
        return body if isinstance(body, dict) else {}

    def ready(self) -> Dict[str, Any]:
        """``GET /api/ready``."""
        body = self._call("discovery", "GET", "/ready", route="/ready")
        return body if isinstance(body, dict) else {}

    def cluster_info(self, *, refresh: bool = False) -> Dict[str, Any]:
        """``GET /api/cluster/info``, cached on the client until ``refresh``."""
        with self._cluster_lock:
            cached = self._cluster_info
        if cached is not None and not refresh:
            return cached
        body = self._call("discovery", "GET", "/cluster/info", route="/cluster/info")
        if not isinstance(body, dict):
            raise errors.ServerError(200, {"reason": "invalid_cluster_info"}, route="/cluster/info")
        with self._cluster_lock:
            self._cluster_info = body
        return body

    def server_capabilities(self) -> Dict[str, Any]:
        """``worker_protocol.server_capabilities`` of the cached cluster info (``{}`` before discovery)."""
        info = self._cluster_info or {}
        protocol = info.get("worker_protocol")
        capabilities = protocol.get("server_capabilities") if isinstance(protocol, dict) else None
        return capabilities if isinstance(capabilities, dict) else {}

    def trace_context_supported(self) -> bool:
        """Whether the server keeps a W3C trace-context carrier (``observability_context``).

        Read from the cached cluster info; a client that has not discovered the server yet asks
        ``/api/cluster/info`` once (only instrumentations call this, when they have a carrier to
        send). An unreachable server counts as "no" and is asked again at most once a minute.
        """
        from ..protocol.trace_context import advertised

        if self._cluster_info is None:
            failed = self._trace_context_probe_failed_at
            if failed is not None and time.monotonic() - failed < 60.0:
                return False
            try:
                self.cluster_info()
            except Exception:
                self._trace_context_probe_failed_at = time.monotonic()
                return False
        return advertised(self.server_capabilities())

    def _workflow_call(self, call: ClientCall, send: Any) -> Any:
        """``send(body)`` for a call on a workflow, through the installed client hooks (instrumentation)."""
        return observe_client_call(call, lambda value: send(dict(value.body)))

    def _call_about(self, operation: str, workflow_id: str, body: Dict[str, Any], **fields: Any) -> ClientCall:
        return ClientCall(operation=operation, workflow_id=workflow_id, body=body, namespace=self.namespace,
                          trace_context_supported=self.trace_context_supported, **fields)

    def server_max_payload_bytes(self) -> Optional[int]:
        limits = (self._cluster_info or {}).get("limits")
        value = limits.get("max_payload_bytes") if isinstance(limits, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def failure_report_limit(self) -> int:
        """The request budget failure reports are bounded to (never above 1 MiB)."""
        from ..failure_reports import effective_limit

        return effective_limit(self.failure_report_limit_bytes, self.server_max_payload_bytes())
