"""The transport against scripted misbehaving servers over real sockets (issue 9): every attempt
has an absolute deadline that dripped bytes do not extend (logged when it fires), response bodies
past ``max_body_bytes`` are refused with a typed error without being read whole, and an empty
200 to a poll is an error, not an empty poll. The client keeps working afterwards."""

from __future__ import annotations

import logging
import socket
import time
from typing import Callable, Iterator, List

import pytest

from sync_worker import errors
from sync_worker.client import Client
from tests._misbehaving import MisbehavingServer, RawRequest, drip, json_response, response_head, serving

Serve = Callable[..., MisbehavingServer]


@pytest.fixture
def serve() -> Iterator[Serve]:
    yield from serving()


def _client(url: str, **kwargs: object) -> Client:
    options = {"timeout": 1.0, "connect_timeout": 0.5, "transport_retries": 1, **kwargs}
    return Client(url, **options)  # type: ignore[arg-type]


def test_dripped_body_is_cut_at_the_absolute_deadline(serve: Serve, caplog: pytest.LogCaptureFixture) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        server.send(conn, response_head(200, 10_000))
        drip(server, conn, b" " * 10_000, every=0.2)  # a byte every 0.2 s: each recv is well inside 1 s

    server = serve(script)
    client = _client(server.url)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="sync_worker.http"), pytest.raises(errors.TransportError) as caught:
        client.cluster_info()
    elapsed = time.monotonic() - started
    assert caught.value.deadline_exceeded and caught.value.timeout
    assert elapsed < 4.0, elapsed  # connect 0.5 s + read 1 s budget, not 2000 s of dripping
    assert any("absolute deadline" in r.getMessage() and "/cluster/info" in r.getMessage() for r in caplog.records)


def test_dripped_headers_are_cut_at_the_absolute_deadline(serve: Serve) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        drip(server, conn, b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 5000 + b"\r\n\r\n{}", every=0.2)

    client = _client(serve(script).url)
    started = time.monotonic()
    with pytest.raises(errors.TransportError) as caught:
        client.health()
    assert caught.value.deadline_exceeded
    assert time.monotonic() - started < 4.0


def test_dripped_long_poll_is_cut_at_its_deadline(serve: Serve) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        server.send(conn, response_head(200, 100_000))
        drip(server, conn, b" " * 100_000, every=0.5)

    client = _client(serve(script).url)
    started = time.monotonic()
    with pytest.raises(errors.TransportError) as caught:
        client.poll_activity_task(worker_id="w", task_queue="q", poll_request_id="p", timeout_seconds=0)
    assert caught.value.deadline_exceeded
    # a zero-second poll reads for at most 5 s (+ connect): the drip would have lasted 14 hours
    assert time.monotonic() - started < 8.0


def test_declared_huge_body_is_refused_without_reading_it(serve: Serve) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        server.send(conn, response_head(200, 100 * 1024 * 1024))
        chunk = b"0" * 65536
        for _ in range(1600):
            server.send(conn, chunk)

    server = serve(script)
    client = _client(server.url, max_body_bytes=1024 * 1024, timeout=10.0)
    with pytest.raises(errors.ResponseTooLarge) as caught:
        client.cluster_info()
    assert caught.value.limit_bytes == 1024 * 1024
    assert caught.value.declared_bytes == 100 * 1024 * 1024
    assert isinstance(caught.value, errors.TransportError)
    time.sleep(0.3)
    assert server.sent < 20 * 1024 * 1024  # we hung up long before 100 MB


def test_undeclared_huge_body_is_refused_at_the_bound(serve: Serve) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        server.send(conn, response_head(200, None, "Connection: close"))
        for _ in range(1600):  # a 100 MB body ended by closing the connection
            server.send(conn, b"1" * 65536)
        conn.close()

    server = serve(script)
    client = _client(server.url, max_body_bytes=2 * 1024 * 1024, timeout=10.0)
    with pytest.raises(errors.ResponseTooLarge) as caught:
        client.cluster_info()
    assert caught.value.declared_bytes is None
    time.sleep(0.3)
    assert server.sent < 30 * 1024 * 1024


def test_client_keeps_working_after_refusals(serve: Serve) -> None:
    calls: List[int] = []

    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        calls.append(1)
        if len(calls) == 1:
            server.send(conn, response_head(200, 50 * 1024 * 1024))
            server.send(conn, b"x" * 65536)
            return
        json_response(server, conn, {"status": "serving"})

    client = _client(serve(script).url, max_body_bytes=1024)
    with pytest.raises(errors.ResponseTooLarge):
        client.health()
    assert client.health() == {"status": "serving"}


def test_empty_200_to_a_poll_is_an_error_not_an_empty_poll(serve: Serve) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        server.send(conn, response_head(200, 0))

    client = _client(serve(script).url)
    with pytest.raises(errors.ServerError) as caught:
        client.poll_workflow_task(worker_id="w", task_queue="q", poll_request_id="p", timeout_seconds=0)
    assert caught.value.status == 200 and caught.value.reason() == "empty_poll_response"


def test_a_real_empty_poll_is_still_none(serve: Serve) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        json_response(server, conn, {"task": None, "poll_status": "timeout"})

    client = _client(serve(script).url)
    assert client.poll_workflow_task(worker_id="w", task_queue="q", poll_request_id="p", timeout_seconds=0) is None
