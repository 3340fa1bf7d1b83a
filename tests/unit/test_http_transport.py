"""The transport over real sockets, against small misbehaving local servers.

Covers what ``responses`` cannot: aborting a blocked long poll from another thread, transport
retries (count, identical bodies), refused connections, abrupt disconnects, slow bodies and
pool sizing under concurrency.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterator, List

import pytest

from sync_worker import errors
from sync_worker.cancel import CancelToken
from sync_worker.client import Client

Handler = Callable[[BaseHTTPRequestHandler, Dict[str, Any]], None]


class _Server:
    def __init__(self, handler: Handler) -> None:
        self.bodies: List[Dict[str, Any]] = []
        self.release = threading.Event()
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                outer.bodies.append(body)
                handler(self, body)

            do_GET = do_POST

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _reply(handler: BaseHTTPRequestHandler, status: int, body: Any) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], _Server]]:
    servers: List[_Server] = []

    def start(handler: Handler) -> _Server:
        server = _Server(handler)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def _poll(client: Client, cancel: CancelToken | None = None, timeout_seconds: int = 30) -> Any:
    return client.poll_activity_task(worker_id="w", task_queue="q", poll_request_id="activity-poll-x",
                                     timeout_seconds=timeout_seconds, cancel=cancel)


def test_cancel_aborts_a_blocked_long_poll_at_once(serve: Callable[[Handler], _Server]) -> None:
    server = serve(lambda h, body: (server.release.wait(30), _reply(h, 200, {"task": None})))
    client = Client(server.url)
    cancel = CancelToken()
    outcome: Dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            _poll(client, cancel)
        except BaseException as exc:
            outcome["error"] = exc
        outcome["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.3)
    cancel_at = time.monotonic()
    cancel.cancel()
    thread.join(5)
    assert not thread.is_alive()
    assert isinstance(outcome["error"], errors.WorkerShutdown)
    assert time.monotonic() - cancel_at < 1.0
    assert len(server.bodies) == 1  # the aborted poll was not retried


def test_cancelled_token_refuses_to_send(serve: Callable[[Handler], _Server]) -> None:
    server = serve(lambda h, body: _reply(h, 200, {"task": None}))
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(errors.WorkerShutdown):
        _poll(Client(server.url), cancel)
    assert server.bodies == []


def test_transient_5xx_is_retried_with_identical_body(serve: Callable[[Handler], _Server]) -> None:
    def handler(h: BaseHTTPRequestHandler, body: Dict[str, Any]) -> None:
        if len(server.bodies) < 3:
            _reply(h, 502, {"reason": "bad_gateway"})
        else:
            _reply(h, 200, {"task": {"task_id": "t1"}})

    server = serve(handler)
    assert _poll(Client(server.url, transport_retries=3)) == {"task_id": "t1"}
    assert len(server.bodies) == 3
    assert all(body == server.bodies[0] for body in server.bodies)


def test_retry_budget_is_bounded_and_error_is_typed(serve: Callable[[Handler], _Server]) -> None:
    server = serve(lambda h, body: _reply(h, 503, {"reason": "overloaded", "retry_after_seconds": 2}))
    with pytest.raises(errors.ServerUnavailable) as caught:
        _poll(Client(server.url, transport_retries=3))
    assert len(server.bodies) == 3
    assert caught.value.retry_after_seconds == 2


def test_client_errors_are_not_retried(serve: Callable[[Handler], _Server]) -> None:
    server = serve(lambda h, body: _reply(h, 401, {"reason": "unauthorized", "message": "bad token"}))
    with pytest.raises(errors.Unauthorized):
        _poll(Client(server.url, token="nope", transport_retries=3))
    assert len(server.bodies) == 1


def test_retry_wait_is_interrupted_by_shutdown(serve: Callable[[Handler], _Server]) -> None:
    server = serve(lambda h, body: _reply(h, 500, {"reason": "boom"}))
    client = Client(server.url, transport_retries=50)
    cancel = CancelToken()
    threading.Timer(0.5, cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(errors.WorkerShutdown):
        _poll(client, cancel)
    assert time.monotonic() - started < 3.0


def test_refused_connection_names_the_url_without_credentials() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = Client(f"http://user:hunter2@127.0.0.1:{port}", transport_retries=2)
    with pytest.raises(errors.TransportError) as caught:
        _poll(client)
    assert caught.value.connect is True
    message = str(caught.value)
    assert "hunter2" not in message and "user" not in message
    assert message == (f"POST http://127.0.0.1:{port}/api/worker/activity-tasks/poll: connection refused "
                       f"(is a Durable Workflow server listening at http://127.0.0.1:{port}?)")
    assert caught.value.route == "/worker/activity-tasks/poll"
    assert caught.value.url == f"http://127.0.0.1:{port}"


def test_abrupt_disconnect_is_a_transport_error(serve: Callable[[Handler], _Server]) -> None:
    def handler(h: BaseHTTPRequestHandler, body: Dict[str, Any]) -> None:
        h.connection.shutdown(socket.SHUT_RDWR)

    server = serve(handler)
    with pytest.raises(errors.TransportError) as caught:
        _poll(Client(server.url, transport_retries=2))
    assert caught.value.connect is False
    assert len(server.bodies) == 2


def test_read_timeout_is_a_transport_timeout(serve: Callable[[Handler], _Server]) -> None:
    server = serve(lambda h, body: server.release.wait(10))
    client = Client(server.url, timeout=0.5, transport_retries=1)
    started = time.monotonic()
    with pytest.raises(errors.TransportError) as caught:
        client.heartbeat_worker({"worker_id": "w"})
    assert caught.value.timeout is True
    assert time.monotonic() - started < 3


def test_invalid_json_success_is_a_typed_error(serve: Callable[[Handler], _Server]) -> None:
    def handler(h: BaseHTTPRequestHandler, body: Dict[str, Any]) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "9")
        h.end_headers()
        h.wfile.write(b"not json!")

    server = serve(handler)
    with pytest.raises(errors.ServerError) as caught:
        Client(server.url, transport_retries=1).heartbeat_worker({"worker_id": "w"})
    assert caught.value.reason() == "invalid_json_response"


def _waves(client: Client, size: int, waves: int = 2) -> None:
    for _ in range(waves):
        threads = [threading.Thread(target=_poll, args=(client,)) for _ in range(size)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(15)


def _gated_handler(size: int, peers: List[Any]) -> Handler:
    gate = threading.Barrier(size, timeout=10)

    def handler(h: BaseHTTPRequestHandler, body: Dict[str, Any]) -> None:
        peers.append(h.client_address)
        gate.wait()  # every wave's requests are all in flight at once before any is answered
        _reply(h, 200, {"task": None})

    return handler


def test_pool_serves_concurrency_without_discarding(serve: Callable[[Handler], _Server]) -> None:
    peers: List[Any] = []
    handler = _gated_handler(40, peers)
    server = serve(handler)
    client = Client(server.url, max_connections=40)
    _waves(client, 40)
    assert len(peers) == 80
    # the second wave of 40 concurrent polls went on the first wave's 40 pooled connections
    assert len(set(peers)) == 40


def test_pool_grows_on_demand_for_a_bigger_worker(serve: Callable[[Handler], _Server]) -> None:
    peers: List[Any] = []
    handler = _gated_handler(30, peers)
    server = serve(handler)
    client = Client(server.url, max_connections=4)
    client.ensure_pool_capacity(30)
    client.ensure_pool_capacity(10)  # never shrinks
    assert client.max_connections == 30
    _waves(client, 30)
    assert len(peers) == 60 and len(set(peers)) == 30  # 30 kept, none discarded


def test_a_pool_smaller_than_the_concurrency_keeps_only_its_size(serve: Callable[[Handler], _Server]) -> None:
    peers: List[Any] = []
    handler = _gated_handler(8, peers)
    server = serve(handler)
    client = Client(server.url, max_connections=2)
    _waves(client, 8)
    assert len(peers) == 16
    assert len(set(peers)) == 14  # 8 opened, 2 kept for the second wave, 6 opened afresh


def test_connection_closed_by_the_server_is_not_reused(serve: Callable[[Handler], _Server]) -> None:
    def handler(h: BaseHTTPRequestHandler, body: Dict[str, Any]) -> None:
        _reply(h, 200, {"task": None})
        h.wfile.flush()
        h.close_connection = True  # keep-alive was promised; the server hangs up anyway

    server = serve(handler)
    client = Client(server.url, transport_retries=1)  # no retry may hide a reused dead connection
    for _ in range(5):
        assert _poll(client) is None
        time.sleep(0.05)
    assert len(server.bodies) == 5
