"""The dev server's own HTTP/1.1 wire (``sync_worker.devserver.wire``) over real sockets.

Every malformed head gets a 4xx JSON refusal with a reason (never a 5xx), the connection closes
when its framing cannot be trusted, and the server keeps serving other connections; keep-alive,
pipelining, ``Expect: 100-continue`` and HTTP/1.0 behave as RFC 9112 says.
"""

from __future__ import annotations

import io
import json
import socket
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sync_worker.devserver import DevServer
from sync_worker.devserver.wire import _read_fields_slowly, read_head
from sync_worker.payloads import envelope

Response = Tuple[int, Dict[str, str], bytes]

CONTROL = "X-Durable-Workflow-Control-Plane-Version: 2\r\n"


@pytest.fixture(scope="module")
def server() -> Iterator[DevServer]:
    with DevServer(max_request_bytes=64 * 1024) as dev:
        yield dev


class Conn:
    """One raw socket; reads responses by hand so pipelined answers are not swallowed by a buffer."""

    def __init__(self, dev: DevServer) -> None:
        self.sock = socket.create_connection((dev.host, dev.port), timeout=10)
        self.reader = self.sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self) -> Optional[Response]:
        line = self.reader.readline()
        if not line:
            return None
        status = int(line.split()[1])
        headers: Dict[str, str] = {}
        while True:
            raw = self.reader.readline().decode("latin-1")
            if raw in ("\r\n", ""):
                break
            name, _, value = raw.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = self.reader.read(int(headers.get("content-length", "0")))
        return status, headers, body

    def closed_by_server(self) -> bool:
        try:
            return self.reader.read(1) == b""
        except OSError:
            return True

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def _request(method: str, path: str, body: bytes = b"", extra: str = "", version: str = "HTTP/1.1") -> bytes:
    head = f"{method} {path} {version}\r\nHost: x\r\n{extra}"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return (head + "\r\n").encode("latin-1") + body


def _exchange(dev: DevServer, data: bytes) -> Tuple[Optional[Response], bool]:
    conn = Conn(dev)
    try:
        conn.send(data)
        got = conn.response()
        return got, conn.closed_by_server()
    finally:
        conn.close()


def _refused(got: Optional[Response], status: int, reason: str) -> Dict[str, Any]:
    assert got is not None, "no response"
    assert got[0] == status, got
    assert got[1]["content-type"] == "application/json"
    body: Dict[str, Any] = json.loads(got[2])
    assert body["reason"] == reason, body
    assert isinstance(body["error"], str) and body["error"]
    return body


def _still_serving(dev: DevServer) -> None:
    got, _ = _exchange(dev, _request("GET", "/api/health", extra="Connection: close\r\n"))
    assert got is not None and got[0] == 200 and json.loads(got[2])["status"] == "serving"


HEAD_REFUSALS = {
    "garbage_request_line": (b"NOT AN HTTP REQUEST LINE AT ALL\r\n\r\n", 400, "bad_request"),
    "two_words": (b"GET /api/health\r\n\r\n", 400, "bad_request"),
    "relative_target": (b"GET api/health HTTP/1.1\r\n\r\n", 400, "bad_request"),
    "http2": (b"GET /api/health HTTP/2.0\r\n\r\n", 400, "http_version_not_supported"),
    "http09_style": (b"GET /api/health HTTP/0.9\r\n\r\n", 400, "http_version_not_supported"),
    "long_request_line": (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414, "uri_too_long"),
    "long_header_line": (b"GET /api/health HTTP/1.1\r\nX-Big: " + b"b" * 70000 + b"\r\n\r\n", 431,
                         "request_header_fields_too_large"),
    "too_many_headers": (b"GET /api/health HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(101))
                         + b"\r\n", 431, "request_header_fields_too_large"),
    "head_too_large": (b"GET /api/health HTTP/1.1\r\n" + b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 1000)
                                                                  for i in range(70)) + b"\r\n",
                       431, "request_header_fields_too_large"),
    "space_before_colon": (b"GET /api/health HTTP/1.1\r\nHost : x\r\n\r\n", 400, "bad_request"),
    "no_colon": (b"GET /api/health HTTP/1.1\r\nJustAName\r\n\r\n", 400, "bad_request"),
    "obs_fold": (b"GET /api/health HTTP/1.1\r\nX-A: one\r\n two\r\n\r\n", 400, "bad_request"),
    "nul_in_value": (b"GET /api/health HTTP/1.1\r\nX-A: a\x00b\r\n\r\n", 400, "bad_request"),
    "cl_not_a_number": (b"POST /api/workflows HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400,
                        "invalid_content_length"),
    "cl_negative": (b"POST /api/workflows HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "invalid_content_length"),
    "cl_plus_sign": (b"POST /api/workflows HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello", 400,
                     "invalid_content_length"),
    "cl_underscore": (b"POST /api/workflows HTTP/1.1\r\nContent-Length: 1_0\r\n\r\n", 400, "invalid_content_length"),
    "cl_conflicting": (b"POST /api/workflows HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400,
                       "invalid_content_length"),
    "cl_list": (b"POST /api/workflows HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\n{}", 400, "invalid_content_length"),
    "chunked": (b"POST /api/workflows HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 411,
                "length_required"),
    "te_and_cl": (b"POST /api/workflows HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: gzip\r\n\r\n{}", 411,
                  "length_required"),
    "unknown_expectation": (b"POST /api/workflows HTTP/1.1\r\nExpect: telepathy\r\nContent-Length: 2\r\n\r\n{}",
                            417, "expectation_failed"),
    "unknown_method": (b"FOO /api/health HTTP/1.1\r\n\r\n", 405, "method_not_allowed"),
}


@pytest.mark.parametrize("name", sorted(HEAD_REFUSALS))
def test_malformed_heads_are_a_4xx_with_a_reason_and_close(name: str, server: DevServer) -> None:
    data, status, reason = HEAD_REFUSALS[name]
    got, closed = _exchange(server, data)
    _refused(got, status, reason)
    assert got is not None and got[1].get("connection") == "close"
    assert closed, "the server must close a connection whose framing it refused"
    _still_serving(server)


def test_keep_alive_serves_many_requests_on_one_connection(server: DevServer) -> None:
    conn = Conn(server)
    try:
        for _ in range(5):
            conn.send(_request("GET", "/api/health"))
            got = conn.response()
            assert got is not None and got[0] == 200 and "connection" not in got[1]
        # An API refusal (not a framing one) keeps the connection too, once its body is read.
        conn.send(_request("POST", "/api/workflows", b'{"broken"', extra=CONTROL))
        _refused(conn.response(), 400, "malformed_json")
        conn.send(_request("GET", "/api/health"))
        got = conn.response()
        assert got is not None and got[0] == 200
    finally:
        conn.close()


def test_pipelined_requests_are_answered_in_order(server: DevServer) -> None:
    conn = Conn(server)
    try:
        start = json.dumps({"workflow_id": "wire-pipelined", "workflow_type": "t", "task_queue": "wire-q",
                            "input": envelope([])}).encode()
        conn.send(_request("GET", "/api/health")
                  + _request("POST", "/api/workflows", start, extra=CONTROL)
                  + _request("GET", "/api/nope", extra=CONTROL)
                  + _request("GET", "/api/workflows/wire-pipelined", extra=CONTROL))
        answers = [conn.response() for _ in range(4)]
        assert [a[0] if a else None for a in answers] == [200, 201, 404, 200]
        assert answers[0] is not None and json.loads(answers[0][2])["status"] == "serving"
        _refused(answers[2], 404, "route_not_found")
        assert answers[3] is not None and json.loads(answers[3][2])["workflow_id"] == "wire-pipelined"
    finally:
        conn.close()


def test_connection_close_and_http10(server: DevServer) -> None:
    got, closed = _exchange(server, _request("GET", "/api/health", extra="Connection: close\r\n"))
    assert got is not None and got[0] == 200 and got[1]["connection"] == "close" and closed
    got, closed = _exchange(server, _request("GET", "/api/health", version="HTTP/1.0"))
    assert got is not None and got[0] == 200 and closed
    conn = Conn(server)
    try:
        for _ in range(2):
            conn.send(_request("GET", "/api/health", extra="Connection: keep-alive\r\n", version="HTTP/1.0"))
            answer = conn.response()
            assert answer is not None and answer[0] == 200
    finally:
        conn.close()


def test_expect_100_continue(server: DevServer) -> None:
    conn = Conn(server)
    try:
        body = json.dumps({"workflow_id": "wire-expect", "workflow_type": "t", "task_queue": "wire-q",
                           "input": envelope([])}).encode()
        conn.send(f"POST /api/workflows HTTP/1.1\r\nHost: x\r\n{CONTROL}Expect: 100-continue\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        interim = conn.response()
        assert interim is not None and interim[0] == 100
        conn.send(body)
        final = conn.response()
        assert final is not None and final[0] == 201, final
    finally:
        conn.close()


def test_expect_100_continue_with_a_body_over_the_limit_gets_the_413_at_once(server: DevServer) -> None:
    got, closed = _exchange(server, f"POST /api/workflows HTTP/1.1\r\nHost: x\r\n{CONTROL}Expect: 100-continue\r\n"
                                    f"Content-Type: application/json\r\nContent-Length: {10 ** 8}\r\n\r\n".encode())
    _refused(got, 413, "payload_too_large")
    assert closed


def test_leading_empty_lines_absolute_form_and_header_case(server: DevServer) -> None:
    got, _ = _exchange(server, b"\r\n\r\n" + _request("GET", "/api/health", extra="Connection: close\r\n"))
    assert got is not None and got[0] == 200
    got, _ = _exchange(server, _request("GET", "http://example.test/api/health", extra="Connection: close\r\n"))
    assert got is not None and got[0] == 200
    got, _ = _exchange(server, _request("GET", "/api/workflows", extra="x-durable-workflow-CONTROL-plane-version: 2\r\n"
                                                                     "Connection: close\r\n"))
    assert got is not None and got[0] == 200, got


def test_body_cut_short_is_refused_and_the_server_survives(server: DevServer) -> None:
    conn = Conn(server)
    try:
        conn.send(f"POST /api/workflows HTTP/1.1\r\nHost: x\r\n{CONTROL}Content-Type: application/json\r\n"
                  f"Content-Length: 500\r\n\r\n{{\"workflow_id\"".encode())
        conn.sock.shutdown(socket.SHUT_WR)
        got = conn.response()
        if got is not None:  # the peer half-closed: the refusal may still reach it
            _refused(got, 400, "incomplete_body")
    finally:
        conn.close()
    _still_serving(server)


def test_oversized_declared_body_is_413_without_reading_it(server: DevServer) -> None:
    got, closed = _exchange(server, f"POST /api/workflows HTTP/1.1\r\nHost: x\r\n{CONTROL}"
                                    f"Content-Type: application/json\r\nContent-Length: {10 ** 9}\r\n\r\n".encode())
    _refused(got, 413, "payload_too_large")
    assert closed


def test_a_client_hanging_up_mid_head_does_not_break_the_server(server: DevServer) -> None:
    for partial in (b"GET /api/hea", b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-Part", b"\r\n"):
        with socket.create_connection((server.host, server.port), timeout=5) as sock:
            sock.sendall(partial)
    _still_serving(server)


def test_a_head_dribbled_in_small_segments_is_served(server: DevServer) -> None:
    body = json.dumps({"workflow_id": "wire-dribbled", "workflow_type": "t", "task_queue": "wire-q",
                       "input": envelope([])}).encode()
    data = _request("POST", "/api/workflows", body, extra=CONTROL + "X-Spaced:   padded value \t \r\n")
    conn = Conn(server)
    try:
        for start in range(0, len(data), 7):
            conn.send(data[start:start + 7])
            time.sleep(0.001)
        got = conn.response()
        assert got is not None and got[0] == 201, got
    finally:
        conn.close()


def test_bare_lf_line_ends_are_accepted(server: DevServer) -> None:
    got, _ = _exchange(server, b"GET /api/workflows HTTP/1.1\nHost: x\n" + CONTROL.replace("\r\n", "\n").encode()
                       + b"Connection: close\n\n")
    assert got is not None and got[0] == 200, got


@pytest.mark.parametrize("head", [
    b"Host: x\r\n\r\n",
    b"\r\n",
    b"Host: x\r\nX-A:  spaced  \t\r\nx-a: again\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\n",
    b"Accept: a/b, c/d;q=0.9\r\nX-Colon: a:b:c\r\nX-Empty:\r\nX-Latin: caf\xe9\r\n\r\n",
])
def test_the_buffered_fast_path_reads_fields_as_the_line_reader_does(head: bytes) -> None:
    fast = read_head(io.BufferedReader(io.BytesIO(b"GET / HTTP/1.1\r\n" + head + b"rest")))
    assert fast is not None
    slow = _read_fields_slowly(io.BufferedReader(io.BytesIO(head)), 0)
    assert dict(fast.headers.items()) == slow


_VALID = _request("POST", "/api/workflows", b'{"workflow_id": "f", "workflow_type": "t", "task_queue": "q"}',
                  extra=CONTROL)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.sampled_from([b"", b" ", b":", b"\r", b"\n", b"\r\n",
                                                                             b"\x00", b"\xff", b"9", b"-"])),
                min_size=1, max_size=4))
def test_mutated_heads_never_get_a_5xx(server: DevServer, edits: List[Tuple[int, bytes]]) -> None:
    data = bytearray(_VALID)
    for position, replacement in edits:
        position = min(position, len(data) - 1)
        data[position:position + 1] = replacement
    conn = Conn(server)
    try:
        conn.send(bytes(data) + b"\r\n\r\n")
        conn.sock.shutdown(socket.SHUT_WR)
        try:
            got = conn.response()
        except (OSError, ValueError, IndexError):
            got = None
        if got is not None:
            assert 100 <= got[0] < 500, got
            if got[0] >= 400:
                assert json.loads(got[2])["reason"], got
    finally:
        conn.close()
    _still_serving(server)
