"""One HTTP/1.1 request and its response on an open socket: the worker plane's wire.

``http.client`` builds a request with a ``putheader`` call per header and parses every response
head through ``email.parser`` (a feed parser building a ``Message``): about 80 µs of CPU per
keep-alive request, half of it for headers the worker never reads. This module writes the
request as one ``bytes`` in one ``sendall`` and reads the response head with ``readline`` of a
buffered reader, keeping the four fields the transport uses; about 30 µs per request
(``bench/worker_throughput.py``: the worker plane is two requests per task). The failures are
the standard library's own types (``http.client.BadStatusLine``, ``RemoteDisconnected``,
``IncompleteRead``, ``LineTooLong``, ``HTTPException``), so callers handle them as before.

What a response may be (anything else is an error, and the connection is not reused):

* a status line ``HTTP/1.0`` or ``HTTP/1.1`` ``SP 3DIGIT [SP reason]``; interim ``1xx`` responses
  (but 101) are skipped with their headers;
* at most 100 header lines of at most 64 KiB each, ``name: value``;
* a body framed by ``Transfer-Encoding: chunked`` (chunk extensions and trailers read and
  dropped), by ``Content-Length`` (digits; repeated copies must agree), or by the end of the
  connection; none for 204, 304 and 1xx;
* keep-alive unless ``Connection: close``, HTTP/1.0 without ``Connection: keep-alive``, or a
  body ended by closing.

Requests: the method, target and every header are checked for CR, LF (and, in the target, spaces)
before anything is sent, so a header value from configuration cannot inject a header.
"""

from __future__ import annotations

import http.client
import io
import socket
from typing import Dict, Iterator, Mapping, Optional, Tuple

__all__ = ["Response", "connect", "host_header", "read_response", "request_bytes"]

MAX_LINE = 64 * 1024
MAX_HEADERS = 100
_KEPT = (b"content-length", b"content-type", b"transfer-encoding", b"connection")
_NO_BODY = (204, 304)


def request_bytes(method: str, target: str, host: str, headers: Mapping[str, str], body: Optional[bytes]) -> bytes:
    """The request head and body as one ``bytes`` (``Content-Length`` always set for a body)."""
    if not target.startswith("/") or any(c in target for c in " \r\n\t") or any(c in method for c in " \r\n"):
        raise ValueError("invalid request line")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity"]
    for name, value in headers.items():
        if "\r" in name or "\n" in name or ":" in name or "\r" in value or "\n" in value:
            raise ValueError(f"invalid header {name!r}")
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body if body else head


class Response:
    """A response whose head is read; :meth:`chunks` reads the body."""

    __slots__ = ("_chunked", "_fp", "_length", "content_length", "content_type", "status", "will_close")

    def __init__(self, fp: io.BufferedReader, status: int, fields: Dict[bytes, bytes], version: bytes) -> None:
        self._fp = fp
        self.status = status
        self.content_type = fields.get(b"content-type", b"").decode("latin-1")
        connection = fields.get(b"connection", b"").lower()
        self.will_close = b"close" in connection or (version == b"HTTP/1.0" and b"keep-alive" not in connection)
        coding = fields.get(b"transfer-encoding")
        self._chunked = coding is not None and coding.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
        if coding is not None and not self._chunked:
            raise http.client.HTTPException("unsupported transfer coding")
        self._length: Optional[int] = None
        self.content_length: Optional[str] = None
        if status in _NO_BODY or 100 <= status < 200:
            self._length = 0
        elif not self._chunked and b"content-length" in fields:
            values = {v.strip() for v in fields[b"content-length"].split(b",")}
            value = values.pop() if len(values) == 1 else b""
            if not value.isdigit():
                raise http.client.HTTPException("invalid Content-Length")
            self._length = int(value)
            self.content_length = value.decode("ascii")
        elif not self._chunked:
            self.will_close = True  # the body ends with the connection

    def chunks(self) -> Iterator[bytes]:
        """The body in pieces; a body cut short of its framing raises ``IncompleteRead``."""
        fp = self._fp
        if self._length is not None:
            if self._length:
                data = fp.read(self._length)
                if len(data) < self._length:
                    raise http.client.IncompleteRead(data, self._length - len(data))
                yield data
            return
        if not self._chunked:
            while True:
                piece = fp.read1(64 * 1024)
                if not piece:
                    return
                yield piece
        while True:
            size_line = _line(fp)
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise http.client.HTTPException("invalid chunk size") from None
            if size < 0:
                raise http.client.HTTPException("invalid chunk size")
            if size == 0:
                for _ in range(MAX_HEADERS + 1):  # trailers, up to the empty line
                    if _line(fp) in (b"\r\n", b"\n"):
                        return
                raise http.client.HTTPException("too many trailer lines")
            while size:
                piece = fp.read(min(size, 64 * 1024))
                if not piece:
                    raise http.client.IncompleteRead(b"", size)
                size -= len(piece)
                yield piece
            if _line(fp) not in (b"\r\n", b"\n"):
                raise http.client.HTTPException("chunk not followed by CRLF")


def _line(fp: io.BufferedReader) -> bytes:
    line = fp.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise http.client.LineTooLong("header line")
    if not line:
        raise http.client.IncompleteRead(b"")
    return line


def read_response(fp: io.BufferedReader) -> Response:
    """Read a response head from ``fp`` (interim 1xx responses skipped)."""
    while True:
        line = fp.readline(MAX_LINE + 1)
        if not line:
            raise http.client.RemoteDisconnected("the server closed the connection without a response")
        if len(line) > MAX_LINE:
            raise http.client.LineTooLong("status line")
        version, status = _status(line)
        fields = _fields(fp)
        if 100 <= status < 200 and status != 101:
            continue
        return Response(fp, status, fields, version)


def _status(line: bytes) -> Tuple[bytes, int]:
    parts = line.split(None, 2)
    if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") or len(parts[1]) != 3 \
            or not parts[1].isdigit():
        raise http.client.BadStatusLine(line[:80].decode("latin-1", "replace"))
    return parts[0], int(parts[1])


def _fields(fp: io.BufferedReader) -> Dict[bytes, bytes]:
    fields: Dict[bytes, bytes] = {}
    for _ in range(MAX_HEADERS + 1):
        line = fp.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise http.client.LineTooLong("header line")
        if line in (b"\r\n", b"\n"):
            return fields
        if not line:
            raise http.client.IncompleteRead(b"")
        name, colon, value = line.partition(b":")
        if not colon:
            raise http.client.HTTPException("malformed header line")
        key = name.strip().lower()
        if key in _KEPT:
            value = value.strip()
            fields[key] = fields[key] + b", " + value if key in fields else value
    raise http.client.HTTPException(f"more than {MAX_HEADERS} header lines")


def host_header(host: str, port: int, https: bool) -> str:
    """``Host`` for an origin: brackets around an IPv6 literal, no port when it is the default."""
    name = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return name if port == (443 if https else 80) else f"{name}:{port}"


def connect(host: str, port: int, timeout: float, tls: Optional[object]) -> socket.socket:
    """A connected socket (TLS-wrapped with ``tls``, an ``ssl.SSLContext``, checking ``host``)."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            sock = tls.wrap_socket(sock, server_hostname=host)  # type: ignore[attr-defined]
    except BaseException:
        sock.close()
        raise
    return sock
