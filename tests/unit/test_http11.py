"""The worker plane's HTTP/1.1 wire (``sync_worker.client.http11``): response framing, refusals
with the standard library's exception types, and requests that cannot carry injected headers.
Over real sockets it is covered by tests/unit/test_worker_plane_transport.py."""

from __future__ import annotations

import http.client
import io
from typing import List, Tuple

import pytest

from sync_worker.client.http11 import host_header, read_response, request_bytes


def _read(raw: bytes) -> Tuple[int, str, bytes, bool]:
    response = read_response(io.BufferedReader(io.BytesIO(raw)))  # type: ignore[arg-type]
    body = b"".join(response.chunks())
    return response.status, response.content_type, body, response.will_close


def test_content_length_body_and_keep_alive() -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nX-Other: 1\r\n\r\n{}"
    assert _read(raw) == (200, "application/json", b"{}", False)


def test_http_1_0_closes_unless_keep_alive() -> None:
    assert _read(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")[3] is True
    assert _read(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")[3] is False
    assert _read(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")[3] is True
    assert _read(b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 0\r\n\r\n")[3] is True
    assert _read(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")[3] is False


def test_body_without_framing_ends_with_the_connection() -> None:
    assert _read(b"HTTP/1.1 200 OK\r\n\r\nuntil the end") == (200, "", b"until the end", True)


def test_chunked_body_with_extensions_and_trailers() -> None:
    raw = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"4;name=value\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\nX-Trailer: t\r\n\r\n")
    assert _read(raw) == (200, "", b'{"a":1}', False)


def test_interim_responses_are_skipped_and_204_has_no_body() -> None:
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n"
    assert _read(raw) == (204, "", b"", False)


def test_repeated_content_length_must_agree() -> None:
    assert _read(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok")[2] == b"ok"
    for value in (b"Content-Length: 2\r\nContent-Length: 3", b"Content-Length: -1", b"Content-Length: 0x10"):
        with pytest.raises(http.client.HTTPException, match="Content-Length"):
            _read(b"HTTP/1.1 200 OK\r\n" + value + b"\r\n\r\nok")


@pytest.mark.parametrize("raw,error", [
    (b"", http.client.RemoteDisconnected),
    (b"HTTP/2 200 OK\r\n\r\n", http.client.BadStatusLine),
    (b"SMTP ready\r\n\r\n", http.client.BadStatusLine),
    (b"HTTP/1.1 20 OK\r\n\r\n", http.client.BadStatusLine),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", http.client.HTTPException),
    (b"HTTP/1.1 200 OK\r\n" + b"X-Long: " + b"a" * (70 * 1024) + b"\r\n\r\n", http.client.LineTooLong),
    (b"HTTP/1.1 200 OK\r\n" + b"X-Many: 1\r\n" * 101 + b"\r\n", http.client.HTTPException),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5", http.client.IncompleteRead),  # head cut off
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", http.client.HTTPException),
])
def test_malformed_heads_are_typed_errors(raw: bytes, error: type) -> None:
    with pytest.raises(error):
        _read(raw)


@pytest.mark.parametrize("body", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX0\r\n\r\n",
])
def test_bodies_cut_short_or_misframed_are_errors(body: bytes) -> None:
    with pytest.raises(http.client.HTTPException):
        _read(body)


def test_body_is_read_in_pieces_of_at_most_64_kib() -> None:
    payload = b"x" * (200 * 1024)
    raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % len(payload) + payload + b"\r\n0\r\n\r\n"
    response = read_response(io.BufferedReader(io.BytesIO(raw)))  # type: ignore[arg-type]
    pieces: List[bytes] = list(response.chunks())
    assert b"".join(pieces) == payload and max(len(p) for p in pieces) <= 64 * 1024


def test_request_is_one_buffer_with_host_and_length() -> None:
    data = request_bytes("POST", "/api/worker/activity-tasks/poll", "127.0.0.1:8080",
                         {"Authorization": "Bearer t", "Content-Type": "application/json"}, b"{}")
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /api/worker/activity-tasks/poll HTTP/1.1"
    assert b"Host: 127.0.0.1:8080" in lines and b"Content-Length: 2" in lines and b"Authorization: Bearer t" in lines
    assert body == b"{}"
    assert b"Content-Length" not in request_bytes("GET", "/api/health", "h", {}, None)


@pytest.mark.parametrize("method,target,headers", [
    ("POST", "/x", {"Authorization": "Bearer t\r\nX-Injected: 1"}),
    ("POST", "/x", {"Bad\nName": "v"}),
    ("POST", "/x y", {}),
    ("POST", "/x\r\nHost: evil", {}),
    ("PO ST", "/x", {}),
    ("POST", "/x\ty", {}),
    ("POST", "/x\ny", {}),
    ("POST\r", "/x", {}),
    ("POST\n", "/x", {}),
    ("POST", "relative", {}),
])
def test_requests_that_would_inject_are_refused(method: str, target: str, headers: dict) -> None:
    with pytest.raises(ValueError):
        request_bytes(method, target, "h", headers, None)


def test_host_header_forms() -> None:
    assert host_header("example.com", 443, True) == "example.com"
    assert host_header("example.com", 80, False) == "example.com"
    assert host_header("127.0.0.1", 8080, False) == "127.0.0.1:8080"
    assert host_header("::1", 8443, True) == "[::1]:8443"
