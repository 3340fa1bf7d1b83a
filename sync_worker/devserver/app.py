"""The HTTP layer (stdlib ``socketserver`` threads, the lean HTTP/1.1 wire of :mod:`.wire`) and :class:`DevServer`."""

from __future__ import annotations

import functools
import logging
import select
import socket
import socketserver
import sys
import threading
from types import TracebackType
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Type, cast
from urllib.parse import parse_qs, unquote, urlsplit

from ..protocol.versions import WORKER_PROTOCOL_VERSION
from . import quiescence
from .admission import PROTOCOL_HEADER, admit
from .clock import Clock, SystemClock
from .encoding import encode_body
from .engine import Config, Engine
from .payload_checks import plain_json_arguments
from .queries import QueryBroker
from .routes import Request, Routes
from .timers import Scheduler
from .ui import UI, UiResponse
from .util import ApiError
from .validation import parse_json_body
from .wire import CONTINUE, Headers, Reader, WireError, error_response, read_head, response

log = logging.getLogger("sync_worker.devserver")

_UI_MAX_FORM_BYTES = 256 * 1024
_DEBUG = functools.partial(log.isEnabledFor, logging.DEBUG)


class _HTTPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, address: Tuple[str, int], routes: Routes) -> None:
        self.routes = routes
        self.ui = UI(routes.engine)
        self.open_connections: Set[socket.socket] = set()
        self.handler_threads: List[threading.Thread] = []
        self.conn_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address),
                                  name="devserver-http", daemon=True)
        with self.conn_lock:
            self.handler_threads = [t for t in self.handler_threads if t.is_alive()]
            self.handler_threads.append(thread)
        thread.start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Connections cut by our own stop (or by a client hanging up) are not errors worth a traceback.
        if isinstance(sys.exc_info()[1], OSError):
            log.debug("connection from %s closed", client_address)
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self.conn_lock:
            connections = list(self.open_connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def join_threads(self, timeout: float) -> None:
        with self.conn_lock:
            threads = list(self.handler_threads)
        for thread in threads:
            thread.join(timeout)


_METHODS = frozenset({"GET", "POST", "DELETE", "PUT", "PATCH"})


class _Handler(socketserver.StreamRequestHandler):
    """One keep-alive connection: read a head (:mod:`.wire`), dispatch, answer in one ``sendall``."""

    rbufsize = 64 * 1024
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        with self.server.conn_lock:
            self.server.open_connections.add(self.connection)
        self.close_connection = False
        self.command = ""
        self.path = ""
        self.headers = Headers()
        self.content_length = 0

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.conn_lock:
                self.server.open_connections.discard(self.connection)

    def handle(self) -> None:
        while not self.close_connection:
            try:
                self._handle_one()
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                return

    def _handle_one(self) -> None:
        try:
            head = read_head(cast(Reader, self.rfile))  # a BufferedReader (rbufsize > 0)
        except WireError as refusal:
            self.close_connection = True
            log.debug("refused a request from %s: %s %s", self.client_address, refusal.status, refusal.message)
            self.connection.sendall(error_response(refusal))
            return
        except OSError:  # the peer vanished or our own stop shut the socket
            self.close_connection = True
            return
        if head is None:
            self.close_connection = True
            return
        self.command, self.path, self.headers = head.method, head.target, head.headers
        self.content_length = head.content_length
        self.close_connection = not head.keep_alive
        if head.method not in _METHODS:  # the body stays unread: this connection cannot be reused
            self.close_connection = True
            self._send(405, {"error": f"HTTP method {head.method} is not supported", "reason": "method_not_allowed",
                             "message": f"HTTP method {head.method} is not supported"})
            return
        if head.expect_continue and 0 < head.content_length <= self.server.routes.engine.config.max_request_bytes:
            self.connection.sendall(CONTINUE)  # a body over the limit gets its 413 at once instead
        if _DEBUG():
            log.debug("%s %s", self.client_address[0], head.request_line)
        self._dispatch(head.method)

    def _send(self, status: int, body: Any, headers: Optional[Dict[str, str]] = None) -> None:
        self.connection.sendall(response(status, encode_body(body), headers=(headers or {}).items(),
                                         close=self.close_connection))

    def _read_body(self, engine: Engine) -> Dict[str, Any]:
        length = self.content_length
        if length > engine.config.max_request_bytes:
            self.close_connection = True  # the body stays unread: this connection cannot be reused
            raise ApiError(413, "payload_too_large",
                           f"request body of {length} bytes exceeds {engine.config.max_request_bytes} bytes",
                           limit_bytes=engine.config.max_request_bytes)
        data = self._read_exactly(length)
        self._body_read = True
        if not data.strip():
            return {}
        content_type = (self.headers.get("content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json" and not content_type.endswith("+json"):
            raise ApiError(415, "unsupported_media_type", "request bodies must be application/json",
                           content_type=content_type or None)
        return parse_json_body(data)

    def _read_exactly(self, length: int) -> bytes:
        data = self.rfile.read(length) if length else b""
        if len(data) < length:  # the peer closed inside the body
            self.close_connection = True
            raise ApiError(400, "incomplete_body", f"the body ended after {len(data)} of {length} bytes")
        return data

    def _client_connected(self) -> bool:
        """False once the peer closed its end (a hung-up long poll must not take a lease)."""
        try:
            if hasattr(select, "poll"):  # no FD_SETSIZE limit, unlike select()
                poller = select.poll()
                poller.register(self.connection, select.POLLIN)
                readable = bool(poller.poll(0))
            else:  # pragma: no cover - platforms without poll()
                readable = bool(select.select([self.connection], [], [], 0)[0])
            if not readable:
                return True
            peeked: bytes = self.connection.recv(1, socket.MSG_PEEK)
            return peeked != b""
        except (OSError, ValueError):
            return False

    def _discard_body(self, engine: Engine) -> None:
        """A refused request's body must still leave the socket, or keep-alive breaks."""
        length = self.content_length
        if length > engine.config.max_request_bytes or (length and len(self.rfile.read(length)) < length):
            self.close_connection = True
        self._body_read = True

    def _serve_ui(self, method: str, path: str, query: str) -> None:
        """``/ui``: the web UI (HTML pages and form posts, not the JSON API)."""
        length = self.content_length
        if length > _UI_MAX_FORM_BYTES:
            self.close_connection = True
            response_ = UiResponse(413, b"form too large", content_type="text/plain; charset=utf-8")
        else:
            body = self.rfile.read(length) if length else b""
            if len(body) < length:
                self.close_connection = True
                response_ = UiResponse(400, b"incomplete form body", content_type="text/plain; charset=utf-8")
            else:
                try:
                    with self.server.routes.engine.grouped():
                        response_ = self.server.ui.handle(method, path, query, self.headers, body)
                except Exception:
                    log.exception("dev server UI bug while handling %s %s", method, self.path)
                    self.close_connection = True
                    response_ = UiResponse(500, b"internal error in the dev server UI", content_type="text/plain")
        self.connection.sendall(response(response_.status, response_.body, content_type=response_.content_type,
                                         headers=response_.headers, close=self.close_connection))

    def _dispatch(self, method: str) -> None:
        target = self.path
        if target[:1] == "/" and target[:2] != "//" and "?" not in target and "%" not in target \
                and "#" not in target:  # a plain path (every worker call): nothing to split or unquote
            raw_path, raw_query = target, ""
        else:
            parts = urlsplit(target)
            raw_path, raw_query = parts.path, parts.query
        if raw_path == "/ui" or raw_path.startswith("/ui/"):
            try:
                self._serve_ui(method, raw_path, raw_query)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            return
        routes = self.server.routes
        engine = routes.engine
        extra_headers: Dict[str, str] = {}
        self._body_read = False
        try:
            path = unquote(raw_path) if "%" in raw_path else raw_path
            query = {k: v[0] for k, v in parse_qs(raw_query, keep_blank_values=True).items()} if raw_query else {}
            config = engine.config
            plane, namespace = admit(path, self.headers, query, token=config.token, namespaces=engine.namespaces,
                                     worker_token=config.worker_token, control_token=config.control_token)
            if plane == "worker":
                extra_headers[PROTOCOL_HEADER] = WORKER_PROTOCOL_VERSION
            handler, params, known = routes.match(method, path)
            body = self._read_body(engine)
            if plane == "control":
                body = plain_json_arguments(body)
            if handler is None:
                if known:
                    raise ApiError(405, "method_not_allowed", f"{method} is not allowed on {path}")
                raise ApiError(404, "route_not_found", f"no route for {method} {path}")
            request = Request(method=method, path=path, query=query, headers=self.headers, namespace=namespace,
                              plane=plane, body=body, params=params, client_connected=self._client_connected)
            with engine.grouped():  # the answer leaves after the batch it depends on is committed
                status, payload = handler(routes, request)
            self._send(status, payload, extra_headers)
        except ApiError as exc:
            if not self._body_read:
                self._discard_body(engine)
            self._send(exc.status, exc.body(), extra_headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:
            log.exception("dev server bug while handling %s %s", method, self.path)
            self.close_connection = True
            try:
                self._send(500, {"error": "internal server error", "reason": "internal_error"})
            except OSError:
                pass


class DevServer:
    """An embedded Durable Workflow server for development and tests (not for production).

    ``DevServer(port=0, db=":memory:", token=None, namespaces=("default",), host="127.0.0.1")``;
    ``worker_token`` / ``control_token`` add the real server's role credentials (a worker token
    cannot start or terminate workflows; a control token cannot poll); ``trace_context=True`` keeps
    and hands back W3C trace-context carriers as the published SDK expects (the real server does not
    yet, so it is off by default; ``devserver/trace_context.py``);
    use it as a context manager or call :meth:`start` / :meth:`stop`. :attr:`url` is the origin
    the SDK clients take (they add ``/api``). ``clock`` is the server's one clock
    (:class:`~sync_worker.devserver.clock.SystemClock` by default; the time-skipping test
    environment passes a :class:`~sync_worker.devserver.clock.VirtualClock`).
    """

    def __init__(self, port: int = 0, db: str = ":memory:", token: Optional[str] = None,
                 namespaces: Sequence[str] = ("default",), host: str = "127.0.0.1", *,
                 long_poll_max_seconds: float = 60.0, workflow_task_lease_seconds: float = 60.0,
                 activity_task_lease_seconds: float = 300.0, query_timeout_seconds: float = 10.0,
                 update_validation_timeout_seconds: float = 10.0, tick_seconds: float = 0.05,
                 heartbeat_interval_seconds: int = 60,
                 stale_after_seconds: int = 120, max_request_bytes: int = 4 * 1024 * 1024,
                 max_payload_bytes: int = 2 * 1024 * 1024, enforce_workflow_timeouts: bool = True,
                 worker_token: Optional[str] = None, control_token: Optional[str] = None,
                 clock: Optional[Clock] = None, trace_context: bool = False, group_commit: bool = True) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.config = Config(
            namespaces=tuple(namespaces), token=token, worker_token=worker_token, control_token=control_token,
            long_poll_max_seconds=long_poll_max_seconds,
            workflow_task_lease_seconds=workflow_task_lease_seconds,
            activity_task_lease_seconds=activity_task_lease_seconds, query_timeout_seconds=query_timeout_seconds,
            update_validation_timeout_seconds=update_validation_timeout_seconds, tick_seconds=tick_seconds,
            heartbeat_interval_seconds=heartbeat_interval_seconds,
            stale_after_seconds=stale_after_seconds, max_request_bytes=max_request_bytes,
            max_payload_bytes=max_payload_bytes, enforce_workflow_timeouts=enforce_workflow_timeouts,
            trace_context=trace_context, group_commit=group_commit)
        self.host = host
        self.port = port
        self.db = db
        self._engine: Optional[Engine] = None
        self._httpd: Optional[_HTTPServer] = None
        self._scheduler: Optional[Scheduler] = None
        self._serve_thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("DevServer is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("DevServer is not started")
        return self._engine

    def start(self) -> DevServer:
        with self._lock:
            if self._httpd is not None:
                return self
            engine = Engine(self.config, self.db, self.clock)
            routes = Routes(engine, QueryBroker(engine))
            httpd = _HTTPServer((self.host, self.port), routes)
            self.port = int(httpd.server_address[1])
            self._engine, self._httpd = engine, httpd
            self._scheduler = Scheduler(engine)
            self._scheduler.start()
            self._serve_thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                                  name="devserver-accept", daemon=True)
            self._serve_thread.start()
            log.info("dev server listening on %s (db=%s)", self.url, self.db)
            return self

    def stop(self) -> None:
        """Stop accepting, release every long poll, close connections, join threads (idempotent)."""
        with self._lock:
            httpd, engine = self._httpd, self._engine
            if httpd is None or engine is None:
                return
            engine.stopping = True
            engine.notify_everyone()
            httpd.shutdown()
            httpd.server_close()
            httpd.close_connections()
            httpd.join_threads(5.0)
            if self._scheduler is not None:
                self._scheduler.stop()
            if self._serve_thread is not None:
                self._serve_thread.join(5.0)
            with engine.lock:
                engine.store.close()
            self._httpd = None
            self._engine = None
            log.info("dev server on port %s stopped", self.port)

    # -- what the time-skipping environment asks (sync_worker.testing) ----------------------
    def busy_reason(self) -> Optional[str]:
        """Why some worker holds or could take work right now, or ``None`` (see ``quiescence``)."""
        httpd = self._httpd
        if httpd is None:
            raise RuntimeError("DevServer is not started")
        return quiescence.busy_reason(httpd.routes.engine, httpd.routes.broker.in_flight())

    def next_due(self) -> Optional[float]:
        """The next deadline the server acts on by itself (epoch seconds on its clock), or ``None``."""
        return quiescence.next_due(self.engine)

    def fire_due(self) -> None:
        """Act on everything due on the server's clock now, in this thread (then wake the scheduler)."""
        scheduler = self._scheduler
        if scheduler is None:
            raise RuntimeError("DevServer is not started")
        scheduler.tick()
        scheduler.poke()

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.stop()
