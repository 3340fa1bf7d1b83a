"""The HTTP layer (stdlib ``ThreadingHTTPServer``, HTTP/1.1 keep-alive) and :class:`DevServer`."""

from __future__ import annotations

import json
import logging
import select
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Type
from urllib.parse import parse_qs, unquote, urlsplit

from .admission import admit
from .discovery import WORKER_PROTOCOL_VERSION
from .encoding import encode_body
from .engine import Config, Engine
from .payload_checks import plain_json_arguments
from .queries import QueryBroker
from .routes import Request, Routes
from .timers import Scheduler
from .ui import UI, UiResponse
from .util import ApiError
from .validation import parse_json_body

log = logging.getLogger("sync_worker.devserver")

_UI_MAX_FORM_BYTES = 256 * 1024


class _HTTPServer(ThreadingHTTPServer):
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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 64 * 1024  # headers and body leave in one segment (no Nagle/delayed-ACK stalls)
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        with self.server.conn_lock:
            self.server.open_connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.conn_lock:
                self.server.open_connections.discard(self.connection)

    def send_error(self, code: int, message: Optional[str] = None, explain: Optional[str] = None) -> None:
        """Protocol-level refusals from the stdlib parser get the same JSON envelope as the API."""
        if code == 501:  # an HTTP method the server has no handler for
            code = 405
        reasons = {400: "bad_request", 405: "method_not_allowed", 408: "request_timeout", 414: "uri_too_long",
                   431: "request_header_fields_too_large"}
        self.close_connection = True
        body = json.dumps({"error": message or "bad request", "reason": reasons.get(code, "http_error")}).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.wfile.flush()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def _send(self, status: int, body: Any, headers: Optional[Dict[str, str]] = None) -> None:
        data = encode_body(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _read_body(self, engine: Engine) -> Dict[str, Any]:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self.close_connection = True
            raise ApiError(411, "length_required", "chunked request bodies are not supported; send Content-Length")
        raw_length = self.headers.get("Content-Length") or "0"
        try:
            length = int(raw_length)
        except ValueError:
            self.close_connection = True
            raise ApiError(400, "invalid_content_length", "Content-Length is not an integer") from None
        if length < 0:
            self.close_connection = True
            raise ApiError(400, "invalid_content_length", "Content-Length is negative")
        if length > engine.config.max_request_bytes:
            self.close_connection = True  # the body stays unread: this connection cannot be reused
            raise ApiError(413, "payload_too_large",
                           f"request body of {length} bytes exceeds {engine.config.max_request_bytes} bytes",
                           limit_bytes=engine.config.max_request_bytes)
        data = self.rfile.read(length) if length else b""
        self._body_read = True
        if not data.strip():
            return {}
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if content_type != "application/json" and not content_type.endswith("+json"):
            raise ApiError(415, "unsupported_media_type", "request bodies must be application/json",
                           content_type=content_type or None)
        return parse_json_body(data)

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
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if self.headers.get("Transfer-Encoding") or length < 0 or length > engine.config.max_request_bytes:
            self.close_connection = True
        elif length:
            self.rfile.read(length)
        self._body_read = True

    def _serve_ui(self, method: str, path: str, query: str) -> None:
        """``/ui``: the web UI (HTML pages and form posts, not the JSON API)."""
        body = b""
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if self.headers.get("Transfer-Encoding") or length < 0 or length > _UI_MAX_FORM_BYTES:
            self.close_connection = True
            response = UiResponse(413, b"form too large", content_type="text/plain; charset=utf-8")
        else:
            body = self.rfile.read(length) if length else b""
            try:
                response = self.server.ui.handle(method, path, query, self.headers, body)
            except Exception:
                log.exception("dev server UI bug while handling %s %s", method, self.path)
                self.close_connection = True
                response = UiResponse(500, b"internal error in the dev server UI", content_type="text/plain")
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for key, value in response.headers:
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(response.body)
        self.wfile.flush()

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        if parts.path == "/ui" or parts.path.startswith("/ui/"):
            try:
                self._serve_ui(method, parts.path, parts.query)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            return
        routes = self.server.routes
        engine = routes.engine
        extra_headers: Dict[str, str] = {}
        self._body_read = False
        try:
            parts = urlsplit(self.path)
            path = unquote(parts.path)
            query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
            config = engine.config
            plane, namespace = admit(path, self.headers, query, token=config.token, namespaces=engine.namespaces,
                                     worker_token=config.worker_token, control_token=config.control_token)
            if plane == "worker":
                extra_headers["X-Durable-Workflow-Protocol-Version"] = WORKER_PROTOCOL_VERSION
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
    cannot start or terminate workflows; a control token cannot poll);
    use it as a context manager or call :meth:`start` / :meth:`stop`. :attr:`url` is the origin
    the SDK clients take (they add ``/api``).
    """

    def __init__(self, port: int = 0, db: str = ":memory:", token: Optional[str] = None,
                 namespaces: Sequence[str] = ("default",), host: str = "127.0.0.1", *,
                 long_poll_max_seconds: float = 60.0, workflow_task_lease_seconds: float = 60.0,
                 activity_task_lease_seconds: float = 300.0, query_timeout_seconds: float = 10.0,
                 tick_seconds: float = 0.05, heartbeat_interval_seconds: int = 60,
                 stale_after_seconds: int = 120, max_request_bytes: int = 4 * 1024 * 1024,
                 max_payload_bytes: int = 2 * 1024 * 1024, enforce_workflow_timeouts: bool = True,
                 worker_token: Optional[str] = None, control_token: Optional[str] = None) -> None:
        self.config = Config(
            namespaces=tuple(namespaces), token=token, worker_token=worker_token, control_token=control_token,
            long_poll_max_seconds=long_poll_max_seconds,
            workflow_task_lease_seconds=workflow_task_lease_seconds,
            activity_task_lease_seconds=activity_task_lease_seconds, query_timeout_seconds=query_timeout_seconds,
            tick_seconds=tick_seconds, heartbeat_interval_seconds=heartbeat_interval_seconds,
            stale_after_seconds=stale_after_seconds, max_request_bytes=max_request_bytes,
            max_payload_bytes=max_payload_bytes, enforce_workflow_timeouts=enforce_workflow_timeouts)
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
            engine = Engine(self.config, self.db)
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

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.stop()
