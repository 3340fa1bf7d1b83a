"""The worker plane's own waits on gevent sockets (``sync_worker.client.green_wait``).

Collected only by ``tests/gevent_suite.py``: the sockets are gevent's. A read timeout counts from
each wait (a server that sends a byte now and then is cut by the absolute deadline, not by a
timer left running from the first wait); a silent server is a read timeout; a shutdown from
another greenlet ends a wait at once.
"""

from __future__ import annotations

import socket
import time
from typing import Iterator, Tuple

import gevent
import pytest

from sync_worker import errors
from sync_worker.cancel import CancelToken
from sync_worker.client import Client
from sync_worker.client.green_wait import GreenWait

_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n"


@pytest.fixture
def listener() -> Iterator[Tuple[socket.socket, str]]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield sock, f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def _client(url: str) -> Client:
    return Client(url, timeout=1.0, connect_timeout=0.5, transport_retries=1)


def test_the_pool_waits_with_its_own_primitives(listener: Tuple[socket.socket, str]) -> None:
    server, url = listener

    def answer() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        conn.recv(1)  # hold the connection until the client closes it

    gevent.spawn(answer)
    client = _client(url)
    assert client.heartbeat_worker({"worker_id": "w"}) == {}
    connection = client._transport._direct._idle[-1]
    assert isinstance(connection.green, GreenWait)
    client.close()


def test_a_dripping_server_is_cut_at_the_absolute_deadline(listener: Tuple[socket.socket, str]) -> None:
    server, url = listener

    def drip() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(_HEAD)
        try:
            for _ in range(50):
                gevent.sleep(0.2)  # well inside the 1 s read timeout, every time
                conn.sendall(b" ")
        except OSError:
            pass

    gevent.spawn(drip)
    started = time.monotonic()
    with pytest.raises(errors.TransportError) as caught:
        _client(url).heartbeat_worker({"worker_id": "w"})
    assert caught.value.deadline_exceeded and caught.value.timeout
    assert 1.4 <= time.monotonic() - started < 3.0  # connect 0.5 + read 1.0


def test_a_silent_server_is_a_read_timeout(listener: Tuple[socket.socket, str]) -> None:
    _, url = listener  # accepted by the kernel's backlog, never answered
    client = Client(url, timeout=0.3, connect_timeout=0.5, transport_retries=1)
    started = time.monotonic()
    with pytest.raises(errors.TransportError) as caught:
        client.heartbeat_worker({"worker_id": "w"})
    assert caught.value.timeout is True and not caught.value.deadline_exceeded
    assert 0.25 <= time.monotonic() - started < 0.75


def test_a_shutdown_ends_a_blocked_poll_at_once(listener: Tuple[socket.socket, str]) -> None:
    _, url = listener
    client = Client(url, timeout=30.0, connect_timeout=0.5, transport_retries=1)
    cancel = CancelToken()
    gevent.spawn_later(0.3, cancel.cancel)
    started = time.monotonic()
    with pytest.raises(errors.WorkerShutdown):
        client.poll_activity_task(worker_id="w", task_queue="q", poll_request_id="p", timeout_seconds=20,
                                  cancel=cancel)
    assert time.monotonic() - started < 2.0


def test_an_answer_already_there_after_a_send_is_read_without_a_timeout() -> None:
    left, right = socket.socketpair()  # gevent's sockets (the suite is patched)
    try:
        left.settimeout(1.0)
        green = GreenWait(left, left._sock, left._read_event, left.hub, gevent.getcurrent)
        assert green.send(b"ping") == 4
        assert right.recv(4) == b"ping"
        right.sendall(b"pong")
        gevent.sleep(0.05)  # the answer is in the socket before the first read waits
        started = time.monotonic()
        assert green.recv(16) == b"pong"
        assert time.monotonic() - started < 0.5  # the wait ended at once (level-triggered), no timeout
        green.send(b"again")
        with pytest.raises(socket.timeout):  # nothing comes: the first read's wait times out as before
            green.recv(16)
        left.settimeout(0.0)
        green.send(b"x")
        with pytest.raises(BlockingIOError):  # a non-blocking socket never waits, first read included
            green.recv(16)
        green.close()
    finally:
        left.close()
        right.close()
