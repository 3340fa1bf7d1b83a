"""The pooled connection's reader: responses read through it as through a BufferedReader, over a
real socket pair, whatever the pieces the bytes arrive in."""

from __future__ import annotations

import http.client
import io
import socket
import threading
from typing import List

import pytest

from sync_worker.client.http11 import read_response
from sync_worker.client.sockreader import SocketReader

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"


def _feed(pieces: List[bytes]) -> socket.socket:
    """A socket whose peer sends ``pieces`` one by one (each its own send), then closes."""
    ours, theirs = socket.socketpair()
    ours.settimeout(5)

    def send() -> None:
        with theirs:
            for piece in pieces:
                theirs.sendall(piece)

    threading.Thread(target=send, daemon=True).start()
    return ours


def _split(data: bytes, size: int) -> List[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 3, 17, 4096])
def test_two_keep_alive_responses_in_any_pieces(size: int) -> None:
    second = b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
    with _feed(_split(OK + second, size)) as sock:
        reader = SocketReader(sock)
        first = read_response(reader)
        assert (first.status, first.content_type, b"".join(first.chunks())) == (200, "application/json", b'{"a":1}')
        assert not first.will_close
        last = read_response(reader)
        assert last.status == 204 and last.will_close and b"".join(last.chunks()) == b""
        assert reader.pending == 0


def test_bytes_past_the_response_are_pending() -> None:
    with _feed([OK + b"HTTP/1.1 200"]) as sock:
        reader = SocketReader(sock)
        response = read_response(reader)
        assert response.read_within(1024) == b'{"a":1}'
        assert reader.pending == len(b"HTTP/1.1 200")  # a pool never reuses such a connection


@pytest.mark.parametrize("raw", [
    b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",  # bare LF lines
    b"HTTP/1.1 200 OK\r\nX-A: 1\nContent-Length: 2\r\n\r\nok",  # one bare LF inside the head
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;x=y\r\no\r\n1\r\nk\r\n0\r\nT: 1\r\n\r\n",
])
def test_reads_what_the_buffered_reader_reads(raw: bytes) -> None:
    expected = read_response(io.BufferedReader(io.BytesIO(raw)))  # type: ignore[arg-type]
    expected_body = b"".join(expected.chunks())
    for size in (1, 5, len(raw)):
        with _feed(_split(raw, size)) as sock:
            got = read_response(SocketReader(sock))
            assert (got.status, got.content_type, got.will_close) == \
                (expected.status, expected.content_type, expected.will_close)
            assert b"".join(got.chunks()) == expected_body == b"ok"


@pytest.mark.parametrize("raw, error", [
    (b"", http.client.RemoteDisconnected),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", http.client.IncompleteRead),
    (b"HTTP/1.1 200 OK\r\nbroken\r\n\r\n", http.client.HTTPException),
    (b"HTTP/9 200 OK\r\n\r\n", http.client.BadStatusLine),
    (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n", http.client.HTTPException),
    (b"HTTP/1.1 200 OK\r\nX: " + b"y" * (64 * 1024) + b"\r\n\r\n", http.client.LineTooLong),
])
def test_bad_responses_are_the_standard_errors(raw: bytes, error: type) -> None:
    with _feed([raw] if raw else []) as sock, pytest.raises(error):
        response = read_response(SocketReader(sock))
        b"".join(response.chunks())


def test_readline_limit_and_read1() -> None:
    with _feed([b"abcdef\nrest"]) as sock:
        reader = SocketReader(sock)
        assert reader.readline(3) == b"abc"
        assert reader.readline(100) == b"def\n"
        assert reader.read1(2) == b"re"
        assert reader.read(10) == b"st"  # the stream ended first
        assert reader.read1(5) == b""


@pytest.mark.parametrize("raw", [
    OK,
    b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n",
    b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nno",
])
def test_a_head_read_again_reads_the_same(raw: bytes) -> None:
    """A head read before comes from the cache of heads (the same bytes read the same way)."""
    from sync_worker.client import http11

    http11._HEADS.clear()
    expected = read_response(io.BufferedReader(io.BytesIO(raw)))  # type: ignore[arg-type]
    expected_state, expected_body = expected.state(), b"".join(expected.chunks())
    for _ in range(3):
        with _feed([raw]) as sock:
            got = read_response(SocketReader(sock))
            assert got.state() == expected_state
            assert b"".join(got.chunks()) == expected_body
    assert len(http11._HEADS) == 1  # a 1xx head is skipped, never kept


def test_a_refused_head_is_refused_every_time() -> None:
    from sync_worker.client import http11

    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"
    for _ in range(2):
        with _feed([raw]) as sock, pytest.raises(http.client.HTTPException, match="transfer coding"):
            read_response(SocketReader(sock))
    assert raw not in http11._HEADS
