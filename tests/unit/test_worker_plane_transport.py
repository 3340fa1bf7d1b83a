"""The worker plane's two transports (the stdlib socket pool, the default, and ``requests``) against
scripted servers over real sockets: the same deadlines, body bounds, typed errors, keep-alive
reuse, TLS settings and recovery on both. Polls and heartbeats are what a worker sends."""

from __future__ import annotations

import _socket
import os
import socket
import ssl
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, List, Tuple

import pytest

from sync_worker import errors
from sync_worker.cancel import CancelToken
from sync_worker.client import Client
from tests._misbehaving import MisbehavingServer, RawRequest, drip, json_response, response_head, serving

Serve = Callable[..., MisbehavingServer]
TRANSPORTS = ("stdlib", "requests")


@pytest.fixture
def serve() -> Iterator[Serve]:
    yield from serving()


def _client(url: str, via: str, **kwargs: Any) -> Client:
    options = {"timeout": 1.0, "connect_timeout": 0.5, "transport_retries": 1, **kwargs}
    return Client(url, worker_plane_transport=via, **options)


def _poll(client: Client, timeout_seconds: int = 0, cancel: Any = None) -> Any:
    return client.poll_activity_task(worker_id="w", task_queue="q", poll_request_id="p",
                                     timeout_seconds=timeout_seconds, cancel=cancel)


def test_the_default_worker_plane_is_the_stdlib_pool() -> None:
    assert Client("http://127.0.0.1:1").worker_plane_transport == "stdlib"
    with pytest.raises(ValueError, match="worker_plane_transport"):
        Client("http://127.0.0.1:1", worker_plane_transport="urllib3")


@pytest.mark.parametrize("via", TRANSPORTS)
def test_keep_alive_connection_is_reused(serve: Serve, via: str) -> None:
    peers: List[Tuple[str, int]] = []

    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        peers.append(conn.getpeername())
        json_response(server, conn, {"task": None})

    server = serve(script)
    client = _client(server.url, via)
    for _ in range(20):
        assert _poll(client) is None
    assert len(peers) == 20 and len(set(peers)) == 1  # one TCP connection carried all 20
    assert server.requests[0].method == "POST" and server.requests[0].path == "/api/worker/activity-tasks/poll"
    assert server.requests[0].headers["host"].startswith("127.0.0.1")


@pytest.mark.parametrize("via", TRANSPORTS)
def test_dripped_poll_body_is_cut_at_the_absolute_deadline(serve: Serve, via: str) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        server.send(conn, response_head(200, 10_000))
        drip(server, conn, b" " * 10_000, every=0.2)

    client = _client(serve(script).url, via)
    started = time.monotonic()
    with pytest.raises(errors.TransportError) as caught:
        client.heartbeat_worker({"worker_id": "w"})
    assert caught.value.deadline_exceeded and caught.value.timeout
    assert time.monotonic() - started < 4.0


@pytest.mark.parametrize("via", TRANSPORTS)
def test_body_cut_short_of_its_length_is_an_error(serve: Serve, via: str) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        server.send(conn, response_head(200, 500) + b'{"task": null')
        conn.shutdown(socket.SHUT_RDWR)

    client = _client(serve(script).url, via)
    with pytest.raises(errors.TransportError) as caught:
        _poll(client)
    assert not caught.value.connect  # the request was sent: not a connect failure


@pytest.mark.parametrize("via", TRANSPORTS)
def test_declared_huge_body_is_refused_without_reading_it(serve: Serve, via: str) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        server.send(conn, response_head(200, 100 * 1024 * 1024))
        for _ in range(1600):
            server.send(conn, b"0" * 65536)

    server = serve(script)
    client = _client(server.url, via, max_body_bytes=1024 * 1024, timeout=10.0)
    with pytest.raises(errors.ResponseTooLarge) as caught:
        _poll(client)
    assert caught.value.declared_bytes == 100 * 1024 * 1024
    time.sleep(0.3)
    assert server.sent < 20 * 1024 * 1024


@pytest.mark.parametrize("via", TRANSPORTS)
def test_chunked_body_is_read_and_bounded(serve: Serve, via: str) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        if len(server.requests) > 2:  # the third answer: 25 MB in chunks, never ending early
            server.send(conn, response_head(200, None, "Transfer-Encoding: chunked"))
            for _ in range(400):
                server.send(conn, b"10000\r\n" + b"1" * 65536 + b"\r\n")
            return
        body = b'{"task": null, "poll_status": "timeout"}'
        server.send(conn, response_head(200, None, "Transfer-Encoding: chunked"))
        server.send(conn, b"%x\r\n%s\r\n" % (10, body[:10]) + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body) - 10, body[10:]))

    server = serve(script)
    client = _client(server.url, via, max_body_bytes=1024 * 1024, timeout=10.0)
    assert _poll(client) is None
    assert _poll(client) is None  # the connection stays usable after a chunked body
    with pytest.raises(errors.ResponseTooLarge) as caught:
        _poll(client)
    assert caught.value.declared_bytes is None
    time.sleep(0.3)
    assert server.sent < 10 * 1024 * 1024


@pytest.mark.parametrize("via", TRANSPORTS)
def test_server_that_hangs_up_between_requests_is_not_sent_on(serve: Serve, via: str) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        json_response(server, conn, {"task": None})
        conn.shutdown(socket.SHUT_RDWR)  # keep-alive was implied; the server closes anyway

    server = serve(script)
    client = _client(server.url, via)  # one attempt: a reused dead connection would fail
    for _ in range(5):
        assert _poll(client) is None
        time.sleep(0.05)
    assert len(server.requests) == 5


@pytest.mark.parametrize("via", TRANSPORTS)
def test_refused_connection_is_a_connect_failure(via: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = _client(f"http://127.0.0.1:{port}", via)
    with pytest.raises(errors.TransportError) as caught:
        _poll(client)
    assert caught.value.connect
    # Both paths name the same URL and cause (issue 27: "name the URL in every transport error").
    assert str(caught.value) == (f"POST http://127.0.0.1:{port}/api/worker/activity-tasks/poll: connection refused "
                                 f"(is a Durable Workflow server listening at http://127.0.0.1:{port}?)")


@pytest.mark.parametrize("via", TRANSPORTS)
def test_shutdown_aborts_a_blocked_poll_and_the_client_recovers(serve: Serve, via: str) -> None:
    release = threading.Event()

    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        if len(server.requests) == 1:
            release.wait(10)  # hold the first poll
        json_response(server, conn, {"task": None})

    server = serve(script)
    client = _client(server.url, via, timeout=30.0)
    token = CancelToken()
    threading.Timer(0.3, token.cancel).start()
    started = time.monotonic()
    with pytest.raises(errors.WorkerShutdown):
        _poll(client, timeout_seconds=20, cancel=token)
    assert time.monotonic() - started < 2.0
    release.set()
    assert _poll(client) is None  # the aborted connection was not put back


@pytest.mark.parametrize("via", TRANSPORTS)
def test_error_status_is_typed_and_the_connection_kept(serve: Serve, via: str) -> None:
    peers: List[Any] = []

    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        peers.append(conn.getpeername())
        if len(server.requests) == 1:
            json_response(server, conn, {"reason": "task_queue_invalid", "message": "bad"}, status=422)
        else:
            json_response(server, conn, {"task": None})

    client = _client(serve(script).url, via)
    with pytest.raises(errors.ServerError) as caught:
        _poll(client)
    assert caught.value.status == 422 and caught.value.reason() == "task_queue_invalid"
    assert _poll(client) is None
    assert len(set(peers)) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_opens_its_own_connection(serve: Serve) -> None:
    peers: List[Any] = []

    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        peers.append(conn.getpeername())
        json_response(server, conn, {"task": None})

    client = _client(serve(script).url, "stdlib")
    assert _poll(client) is None
    pid = os.fork()
    if pid == 0:  # the child: poll on the inherited client, exit with the outcome
        try:
            code = 0 if _poll(client) is None else 1
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert _poll(client) is None  # the parent's pooled connection still works
    assert len(peers) == 3 and peers[0] == peers[2] != peers[1]


# -- TLS on the worker plane -------------------------------------------------------------

trustme = pytest.importorskip("trustme", reason="trustme (dev extra) makes the throwaway certificate authority")


class _Poll(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b'{"task": null}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def tls_server(tmp_path: Any) -> Iterator[Tuple[str, Any, str]]:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Poll)
    httpd.daemon_threads = True
    httpd.socket = server_context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}", ca, str(bundle)
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("via", TRANSPORTS)
@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_tls_poll_with_the_callers_context_a_bundle_path_or_no_check(tls_server: Tuple[str, Any, str],
                                                                     via: str) -> None:
    url, ca, bundle = tls_server
    context = ssl.create_default_context()
    context.load_verify_locations(cadata=ca.cert_pem.bytes().decode())
    assert _poll(_client(url, via, tls_context=context)) is None
    assert _poll(_client(url, via, verify=bundle)) is None
    assert _poll(_client(url, via, verify=False)) is None
    with pytest.raises(errors.TransportError) as caught:  # default trust does not know the throwaway CA
        _poll(_client(url, via))
    assert caught.value.connect or via == "requests"


def _unanswered_heartbeat(body: Any) -> Tuple[Any, float]:
    """A heartbeat sent to a listener that accepts and never reads or answers (read timeout 0.3 s,
    absolute deadline 0.8 s): the raised ``TransportError`` and how long it took."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    try:
        client = Client(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.3, connect_timeout=0.5,
                        transport_retries=1)
        started = time.monotonic()
        with pytest.raises(errors.TransportError) as caught:
            client.heartbeat_worker(body)
        return caught, time.monotonic() - started
    finally:
        listener.close()


def test_a_silent_server_is_a_read_timeout_before_the_absolute_deadline() -> None:
    """The server takes the request and never answers: the read timeout (0.3 s) ends the wait, as a
    typed timeout, well before the attempt's absolute deadline (0.8 s)."""
    caught, elapsed = _unanswered_heartbeat({"worker_id": "w"})
    assert caught.value.timeout is True and not caught.value.deadline_exceeded
    assert isinstance(caught.value.__cause__, socket.timeout)
    assert "timed out" in str(caught.value)
    assert 0.25 <= elapsed < 0.75


def _timeval(sock: Any, option: int) -> Tuple[int, int]:
    return struct.unpack("@ll", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("@ll")))  # type: ignore[no-any-return]


def test_a_plain_socket_is_timed_by_the_kernel(serve: Serve) -> None:
    """On Linux the pooled plain-TCP socket blocks and carries the read timeout as SO_RCVTIMEO (no
    poll() before each recv); a poll's longer read timeout replaces it. A request that fits in the
    socket's buffer is sent without waiting, so SO_SNDTIMEO is left alone until a send may wait."""
    server = serve(lambda server, conn, request: json_response(server, conn, {"task": None}))
    client = _client(server.url, "stdlib", timeout=1.5)
    client.heartbeat_worker({"worker_id": "w"})
    sock = client._transport._direct._idle[-1].sock
    if not sys.platform.startswith("linux") or not isinstance(sock, _socket.socket):
        assert sock.gettimeout() == 1.5  # CPython (or gevent, in a patched process) times the waits out
        return
    assert sock.gettimeout() is None
    assert _timeval(sock, socket.SO_RCVTIMEO) == (1, 500000)
    assert _timeval(sock, socket.SO_SNDTIMEO) == (0, 0)  # never needed
    assert _poll(client, timeout_seconds=2) is None  # read timeout 2 + 5 s
    assert _timeval(sock, socket.SO_RCVTIMEO) == (7, 0)
    assert client.heartbeat_worker({"worker_id": "w", "details": "x" * 8_000_000}) == {"task": None}
    assert client._transport._direct._idle[-1].sock is sock
    assert _timeval(sock, socket.SO_SNDTIMEO) == (1, 500000)  # set for the send that could not go at once


def test_a_send_the_server_does_not_take_is_a_send_timeout() -> None:
    """A request body the server never reads fills the socket: the send waits at most the read
    timeout (0.3 s), well before the attempt's absolute deadline (0.8 s). (The pool's own send: the
    requests path reports what urllib3 makes of it.)"""
    caught, elapsed = _unanswered_heartbeat({"worker_id": "w", "details": "x" * 64_000_000})
    assert caught.value.timeout is True and not caught.value.deadline_exceeded  # not the 0.8 s deadline
    # the elapsed time also holds the 64 MB body's encoding, slow on a loaded machine: bounded loosely
    assert 0.25 <= elapsed < 2.0


def test_polls_and_reports_send_the_same_with_or_without_metrics(serve: Serve) -> None:
    """A poll and a task report send the same whether the client records metrics or not (one
    request builder: metrics only wrap it)."""
    from sync_worker.runtime.metrics import CLIENT_REQUESTS, InMemoryMetrics

    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        json_response(server, conn, {"task": None} if request.path.endswith("/poll") else {"outcome": "completed"})

    server = serve(script)
    metrics = InMemoryMetrics()
    for client in (_client(server.url, "stdlib", token="tok"), _client(server.url, "stdlib", token="tok",
                                                                         metrics=metrics)):
        assert _poll(client, timeout_seconds=1) is None
        assert client.complete_activity_task("t-1", activity_attempt_id="a", lease_owner="w",
                                             result=None) == {"outcome": "completed"}
    plain, measured = server.requests[:2], server.requests[2:]
    assert [(r.method, r.path, r.headers, r.json()) for r in plain] == [
        (r.method, r.path, r.headers, r.json()) for r in measured]
    assert "poll" in plain[0].headers["accept"] and plain[1].headers["accept"] == "application/json"
    assert plain[0].headers["authorization"] == "Bearer tok"
    assert metrics.counter(CLIENT_REQUESTS, method="POST", route="/worker/activity-tasks/poll", plane="worker",
                           status_code="200", outcome="ok") == 1


def test_metrics_set_after_construction_are_recorded_and_can_be_turned_off(serve: Serve) -> None:
    """Whether metrics wrap a request is decided when they are set, not per request: a recorder
    given to a built client counts its next requests (errors too), and ``None`` stops it."""
    from sync_worker.runtime.metrics import CLIENT_REQUESTS, InMemoryMetrics

    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        if request.path.endswith("/fail"):
            json_response(server, conn, {"reason": "task_not_found"}, status=404)
        else:
            json_response(server, conn, {"task": None})

    server = serve(script)
    client = _client(server.url, "stdlib")
    assert _poll(client) is None  # not measured: nothing to record into
    metrics = InMemoryMetrics()
    client.metrics = metrics
    assert _poll(client) is None
    with pytest.raises(errors.NotFound):
        client.fail_activity_task("t-1", activity_attempt_id="a", lease_owner="w", failure={"message": "boom"})
    client.metrics = None
    assert _poll(client) is None
    assert metrics.counter(CLIENT_REQUESTS, method="POST", route="/worker/activity-tasks/poll", plane="worker",
                           status_code="200", outcome="ok") == 1
    assert metrics.counter(CLIENT_REQUESTS, method="POST", route="/worker/activity-tasks/{taskId}/fail",
                           plane="worker", status_code="404", outcome="NotFound") == 1
    assert len(server.requests) == 4
