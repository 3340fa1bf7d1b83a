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

A head read whole from a pooled connection's reader is remembered by its bytes (a bounded cache):
a server sends the same few heads over and over, only its ``Date`` line changing once a second, and
the same bytes always read the same way, so a head seen before is not parsed again.

Requests: the method, target and every header are checked for CR, LF (and, in the target, spaces)
before anything is sent, so a header value from configuration cannot inject a header.
"""

from __future__ import annotations

import http.client
import socket
from typing import Dict, Iterator, Mapping, Optional, Protocol, Sequence, Tuple

__all__ = ["Response", "connect", "host_header", "read_response", "request_bytes"]

MAX_LINE = 64 * 1024
MAX_HEADERS = 100
_KEPT = (b"content-length", b"content-type", b"transfer-encoding", b"connection")
_NO_BODY = (204, 304)


def request_bytes(method: str, target: str, host: str, headers: Mapping[str, str], body: Optional[bytes]) -> bytes:
    """The request head and body as one ``bytes`` (``Content-Length`` always set for a body)."""
    # Substring tests, not a regular expression: a search over every character of the target
    # cost ~1,500 instructions a request (a worker's targets carry task ids, so none is cached).
    if (target[:1] != "/" or " " in target or "\r" in target or "\n" in target or "\t" in target
            or " " in method or "\r" in method or "\n" in method):
        raise ValueError("invalid request line")
    head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + header_block(host, headers)
    if body is not None:
        head += b"Content-Length: %d\r\n\r\n" % len(body)
        return head + body if body else head
    return head + b"\r\n"


#: Header blocks already built and checked, by (host, headers): a worker sends the same few
#: header sets on every request, so each is validated and encoded once.
_BLOCKS: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], bytes] = {}
_BLOCKS_MAX = 64


def header_block(host: str, headers: Mapping[str, str]) -> bytes:
    """``Host``, ``Accept-Encoding`` and ``headers`` as CRLF-ended lines (no blank line), checked."""
    key = (host, tuple(headers.items()))
    block = _BLOCKS.get(key)
    if block is not None:
        return block
    lines = [f"Host: {host}", "Accept-Encoding: identity"]
    for name, value in headers.items():
        if "\r" in name or "\n" in name or ":" in name or "\r" in value or "\n" in value:
            raise ValueError(f"invalid header {name!r}")
        lines.append(f"{name}: {value}")
    block = ("\r\n".join(lines) + "\r\n").encode("latin-1")
    if len(_BLOCKS) >= _BLOCKS_MAX:
        _BLOCKS.clear()  # a bounded cache: header sets that keep changing (rotating tokens) start afresh
    _BLOCKS[key] = block
    return block


#: A response head's reading: status, content type, will close, chunked, body length, Content-Length.
_State = Tuple[int, str, bool, bool, Optional[int], Optional[str]]


class Reader(Protocol):
    """What a response is read from: a ``BufferedReader`` or a pooled connection's ``SocketReader``."""

    def readline(self, __limit: int = ...) -> bytes: ...

    def read(self, __size: int) -> bytes: ...

    def read1(self, __size: int) -> bytes: ...


class Response:
    """A response whose head is read; :meth:`chunks` reads the body."""

    __slots__ = ("_chunked", "_fp", "_length", "content_length", "content_type", "status", "will_close")

    def __init__(self, fp: Reader, status: int, fields: Dict[bytes, bytes], version: bytes) -> None:
        self._fp = fp
        self.status = status
        self.content_type = fields.get(b"content-type", b"").decode("latin-1")
        # bytes.find, not ``in``: CPython (3.11) tries ``sub in data`` as an int first and formats the
        # TypeError it then drops (~1,800 instructions a test, four per task, on both pools).
        connection = fields.get(b"connection", b"").lower()
        self.will_close = connection.find(b"close") >= 0 or (
            version == b"HTTP/1.0" and connection.find(b"keep-alive") < 0)
        coding = fields.get(b"transfer-encoding")
        self._chunked = coding is not None and coding.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
        if coding is not None and not self._chunked:
            raise http.client.HTTPException("unsupported transfer coding")
        self._length: Optional[int] = None
        self.content_length: Optional[str] = None
        if status in _NO_BODY or 100 <= status < 200:
            self._length = 0
        elif not self._chunked and b"content-length" in fields:
            value = fields[b"content-length"]
            if not value.isdigit():
                if value.find(b",") >= 0:  # repeated copies (joined by _keep) must agree
                    values = {v.strip() for v in value.split(b",")}
                    value = values.pop() if len(values) == 1 else b""
                if not value.isdigit():
                    raise http.client.HTTPException("invalid Content-Length")
            self._length = int(value)
            self.content_length = value.decode("ascii")
        elif not self._chunked:
            self.will_close = True  # the body ends with the connection

    def state(self) -> _State:
        """What the head said, as :meth:`known` takes it."""
        return (self.status, self.content_type, self.will_close, self._chunked, self._length, self.content_length)

    @classmethod
    def known(cls, fp: Reader, state: _State) -> Response:
        """The response to a head read before (``state``), read from ``fp``."""
        response = cls.__new__(cls)
        response._fp = fp
        (response.status, response.content_type, response.will_close, response._chunked, response._length,
         response.content_length) = state
        return response

    def read_within(self, limit: int) -> Optional[bytes]:
        """The whole body when its length is declared and at most ``limit`` (else None: use :meth:`chunks`)."""
        length = self._length
        if length is None or length > limit:
            return None
        if not length:
            return b""
        data = self._fp.read(length)
        if len(data) < length:
            raise http.client.IncompleteRead(data, length - len(data))
        return data

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


def _line(fp: Reader) -> bytes:
    line = fp.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise http.client.LineTooLong("header line")
    if not line:
        raise http.client.IncompleteRead(b"")
    return line


#: What heads already read came to, by their bytes: a server sends the same few heads over and over
#: (only its ``Date`` line changes, once a second), and the same bytes always read the same way.
_HEADS: Dict[bytes, _State] = {}
_HEADS_MAX = 64


def read_response(fp: Reader) -> Response:
    """Read a response head from ``fp`` (interim 1xx responses skipped)."""
    take_head = getattr(fp, "take_head", None)  # a pooled connection's reader: the head in one piece
    while True:
        head = take_head(_HEADS) if take_head is not None else None
        if head is not None:
            known = _HEADS.get(head)
            if known is not None:
                return Response.known(fp, known)
            version, status, fields = _parse_head(head)
            if 100 <= status < 200 and status != 101:
                continue
            response = Response(fp, status, fields, version)
            if len(_HEADS) >= _HEADS_MAX:
                _HEADS.clear()  # bounded: heads that keep changing (a request id in each) start afresh
            _HEADS[head] = response.state()
            return response
        else:
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


def _parse_head(head: bytes) -> Tuple[bytes, int, Dict[bytes, bytes]]:
    """A whole head ending ``CRLF CRLF`` with no bare LF in it, by the rules of the line reader."""
    lines = head.split(b"\r\n")[:-2]
    if len(lines) - 1 > MAX_HEADERS:
        raise http.client.HTTPException(f"more than {MAX_HEADERS} header lines")
    if len(lines[0]) + 2 > MAX_LINE:
        raise http.client.LineTooLong("status line")
    version, status = _status(lines[0])
    del lines[0]
    fields: Dict[bytes, bytes] = {}
    _keep(fields, lines)
    return version, status, fields


def _keep(fields: Dict[bytes, bytes], lines: Sequence[bytes]) -> None:
    """Add the header lines (without their line ends) of :data:`_KEPT` names to ``fields``,
    repeats joined by ``, ``: a whole head in one call."""
    for line in lines:
        if len(line) + 2 > MAX_LINE:
            raise http.client.LineTooLong("header line")
        name, colon, value = line.partition(b":")
        if not colon:
            raise http.client.HTTPException("malformed header line")
        key = name.strip().lower()
        if key in _KEPT:
            value = value.strip()
            fields[key] = fields[key] + b", " + value if key in fields else value


def _status(line: bytes) -> Tuple[bytes, int]:
    parts = line.split(None, 2)
    if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") or len(parts[1]) != 3 \
            or not parts[1].isdigit():
        raise http.client.BadStatusLine(line[:80].decode("latin-1", "replace"))
    return parts[0], int(parts[1])


def _fields(fp: Reader) -> Dict[bytes, bytes]:
    fields: Dict[bytes, bytes] = {}
    for _ in range(MAX_HEADERS + 1):
        line = fp.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise http.client.LineTooLong("header line")
        if line in (b"\r\n", b"\n"):
            return fields
        if not line:
            raise http.client.IncompleteRead(b"")
        _keep(fields, (line.rstrip(b"\r\n"),))
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
