"""The dev server's HTTP/1.1 wire: a lean request-head reader and one-write responses.

``http.server.BaseHTTPRequestHandler`` spent more than half of the server's CPU per activity on
the wire: every request head went through ``email.parser`` (a feed parser building a
``Message``), every response through ``send_response`` / ``send_header`` (a formatted ``Date``
each time, a log line formatted even when nobody logs it) and a buffered writer. This module does
the same job with two compiled regular expressions over ``readline`` of the handler's buffered
socket reader, and builds each response as one ``bytes`` for one ``sendall``.

What it accepts, and what it refuses (each refusal a :class:`WireError`: a 4xx with a reason,
answered as JSON, after which the connection is closed because its framing can no longer be
trusted):

* ``METHOD SP target SP HTTP/1.x`` -- one or more empty lines before it are skipped (RFC 9112
  section 2.2); any other shape is ``400 bad_request``; ``HTTP/2.0`` and other versions are
  ``400 http_version_not_supported`` (never a 5xx); a line over 64 KiB is ``414 uri_too_long``.
* Header fields ``name: value``; a name that is not a token, whitespace before the colon or an
  obsolete folded line is ``400 bad_request``; a line over 64 KiB, more than 100 fields or a head
  over 64 KiB is ``431 request_header_fields_too_large``. Repeated fields are joined with ``, ``.
* ``Content-Length`` must be digits only, and repeated copies must agree (``400
  invalid_content_length`` otherwise); a request with neither it nor ``Transfer-Encoding`` has no
  body. Any ``Transfer-Encoding`` (chunked bodies) is ``411 length_required``.
* ``Expect: 100-continue`` on HTTP/1.1 gets the interim ``100 Continue`` (curl sends it for large
  bodies); any other expectation is ``417 expectation_failed``.
* Keep-alive: HTTP/1.1 keeps the connection unless ``Connection: close``; HTTP/1.0 closes it
  unless ``Connection: keep-alive``. Pipelined requests are read from the same buffer in order.
"""

from __future__ import annotations

import json
import re
import time
from email.utils import formatdate
from http import HTTPStatus
from typing import Dict, Iterable, Iterator, List, Optional, Protocol, Tuple

__all__ = ["Head", "Headers", "Reader", "WireError", "read_head", "response", "error_response", "CONTINUE"]

MAX_LINE = 64 * 1024
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
_MAX_BLANK_LINES = 16

_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_REQUEST_LINE = re.compile(rb"(" + _TOKEN + rb") ([\x21-\x7e\x80-\xff]+) HTTP/([0-9])\.([0-9])\r?\n")
_LOOSE_VERSION = re.compile(rb"\S+ \S+ HTTP/[0-9]+(\.[0-9]+)?\r?\n")
_FIELD = re.compile(rb"(" + _TOKEN + rb"):[ \t]*(.*?)[ \t]*\r?\n", re.DOTALL)
_DIGITS = re.compile(r"[0-9]{1,18}")
# The fast path: a whole head of strict ``name: value\r\n`` lines, already in the reader's buffer.
_STRICT_BLOCK = re.compile(rb"(?:" + _TOKEN + rb":[^\r\n\x00]*\r\n)*\r\n")

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_PHRASES: Dict[int, str] = {status.value: status.phrase for status in HTTPStatus}
_SERVER = "sync-worker-devserver"


class Reader(Protocol):
    """What the head reader needs of the socket: ``readline`` with a limit, ``peek`` and ``read``."""

    def readline(self, size: int = -1, /) -> bytes: ...

    def peek(self, size: int = 0, /) -> bytes: ...

    def read(self, size: int = -1, /) -> bytes: ...


class WireError(Exception):
    """A request whose head cannot be served: answered ``status`` with ``reason``, then closed."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


class Headers:
    """Request header fields, looked up case-insensitively (what ``email.message.Message`` gave)."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Optional[Dict[str, str]] = None) -> None:
        self._fields: Dict[str, str] = fields if fields is not None else {}

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        return self._fields.get(name.lower(), default)

    def __getitem__(self, name: str) -> Optional[str]:
        return self._fields.get(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._fields

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def items(self) -> List[Tuple[str, str]]:
        return list(self._fields.items())

    def __repr__(self) -> str:
        return f"Headers({self._fields!r})"


class Head:
    """A parsed request head."""

    __slots__ = ("content_length", "expect_continue", "headers", "keep_alive", "method", "target", "version")

    def __init__(self, method: str, target: str, version: str, headers: Headers, keep_alive: bool,
                 content_length: int, expect_continue: bool) -> None:
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.keep_alive = keep_alive
        self.content_length = content_length
        self.expect_continue = expect_continue

    @property
    def request_line(self) -> str:
        return f"{self.method} {self.target} {self.version}"


def _request_line(rfile: Reader) -> Optional[bytes]:
    for _ in range(_MAX_BLANK_LINES):
        line = rfile.readline(MAX_LINE + 1)
        if line not in (b"\r\n", b"\n"):
            return line or None
    raise WireError(400, "bad_request", "too many empty lines before the request line")


def read_head(rfile: Reader) -> Optional[Head]:
    """Read one request head from ``rfile``; ``None`` when the peer closed between requests."""
    line = _request_line(rfile)
    if line is None:
        return None
    if len(line) > MAX_LINE:
        raise WireError(414, "uri_too_long", f"the request line is longer than {MAX_LINE} bytes")
    found = _REQUEST_LINE.fullmatch(line)
    if found is None:
        if not line.endswith(b"\n"):
            raise WireError(400, "bad_request", "the connection closed inside the request line")
        if _LOOSE_VERSION.fullmatch(line):
            raise WireError(400, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are served")
        raise WireError(400, "bad_request", "malformed request line (expected: METHOD /path HTTP/1.1)")
    method_b, target_b, major, minor = found.groups()
    if major != b"1" or minor not in (b"0", b"1"):
        raise WireError(400, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are served")
    target = target_b.decode("latin-1")
    if not (target[0] == "/" or target.startswith(("http://", "https://"))):
        raise WireError(400, "bad_request", "the request target must be an absolute path")
    fields = _read_fields(rfile, len(line))
    http11 = minor == b"1"
    connection = fields.get("connection", "").lower()
    keep_alive = "close" not in connection if http11 else "keep-alive" in connection
    if "transfer-encoding" in fields:
        raise WireError(411, "length_required",
                        "Transfer-Encoding (chunked request bodies) is not supported; send Content-Length")
    raw_length = fields.get("content-length")
    length = 0
    if raw_length is not None:
        if not _DIGITS.fullmatch(raw_length):
            raise WireError(400, "invalid_content_length", "Content-Length must be a non-negative integer")
        length = int(raw_length)
    expect = fields.get("expect")
    expect_continue = False
    if expect is not None:
        if expect.lower() != "100-continue":
            raise WireError(417, "expectation_failed", f"the expectation {expect!r} is not supported")
        expect_continue = http11
    return Head(method_b.decode("ascii"), target, f"HTTP/1.{minor.decode()}", Headers(fields), keep_alive,
                length, expect_continue)


def _read_fields(rfile: Reader, used: int) -> Dict[str, str]:
    buffered = rfile.peek(1)
    end = 2 if buffered[:2] == b"\r\n" else buffered.find(b"\r\n\r\n") + 4  # 3: not all buffered yet
    if end > 3 or end == 2:
        block = buffered[:end]
        if used + end <= MAX_HEAD_BYTES and block.count(b"\r\n") <= MAX_HEADERS + 1 \
                and _STRICT_BLOCK.fullmatch(block):
            rfile.read(len(block))
            fields: Dict[str, str] = {}
            if end == 2:
                return fields
            # The block matched the strict shape: each line is ``token:value`` (no CR, LF or NUL),
            # so a split on the first colon and a strip of the value's blanks is the whole parse.
            for line in block[:-4].decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                name = name.lower()
                if name in fields:
                    _add_field(fields, name, value.strip(" \t"))
                else:
                    fields[name] = value.strip(" \t")
            return fields
    return _read_fields_slowly(rfile, used)


def _add_field(fields: Dict[str, str], name: str, value: str) -> None:
    previous = fields.get(name)
    if previous is None:
        fields[name] = value
    elif name == "content-length":
        if previous != value:
            raise WireError(400, "invalid_content_length", "conflicting Content-Length fields")
    else:
        fields[name] = f"{previous}, {value}"


def _read_fields_slowly(rfile: Reader, used: int) -> Dict[str, str]:
    """Line by line: heads split over several segments, bare ``\n`` line ends, and every refusal."""
    fields: Dict[str, str] = {}
    count = 0
    while True:
        raw = rfile.readline(MAX_LINE + 1)
        if len(raw) > MAX_LINE:
            raise WireError(431, "request_header_fields_too_large", f"a header line is longer than {MAX_LINE} bytes")
        used += len(raw)
        if used > MAX_HEAD_BYTES:
            raise WireError(431, "request_header_fields_too_large",
                            f"the request head is larger than {MAX_HEAD_BYTES} bytes")
        if raw in (b"\r\n", b"\n"):
            return fields
        if not raw.endswith(b"\n"):
            raise WireError(400, "bad_request", "the connection closed inside the request head")
        count += 1
        if count > MAX_HEADERS:
            raise WireError(431, "request_header_fields_too_large", f"more than {MAX_HEADERS} header fields")
        found = _FIELD.fullmatch(raw)
        if found is None:
            if raw[:1] in (b" ", b"\t"):
                raise WireError(400, "bad_request", "folded header lines (obs-fold) are not accepted")
            raise WireError(400, "bad_request", f"malformed header field {raw[:60]!r}")
        name = found.group(1).decode("ascii").lower()
        value = found.group(2).decode("latin-1")
        if "\r" in value or "\n" in value or "\0" in value:
            raise WireError(400, "bad_request", f"header {name} carries a control character")
        _add_field(fields, name, value)


_date_cache: List[object] = [0, ""]


def _date() -> str:
    second = int(time.time())
    if _date_cache[0] != second:
        _date_cache[1] = formatdate(second, usegmt=True)
        _date_cache[0] = second
    return str(_date_cache[1])


def response(status: int, body: bytes, *, content_type: str = "application/json",
             headers: Iterable[Tuple[str, str]] = (), close: bool = False, head_only: bool = False) -> bytes:
    """A whole response (status line, fields, body) as one ``bytes``."""
    parts = [f"HTTP/1.1 {status} {_PHRASES.get(status, 'Unknown')}\r\nServer: {_SERVER}\r\nDate: {_date()}\r\n"
             f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"]
    for key, value in headers:
        if "\r" in value or "\n" in value:
            raise ValueError(f"header {key} carries a line break")
        parts.append(f"{key}: {value}\r\n")
    parts.append("Connection: close\r\n\r\n" if close else "\r\n")
    head = "".join(parts).encode("latin-1")
    return head if head_only else head + body


def error_response(error: WireError) -> bytes:
    """The JSON refusal of a request the wire could not frame (the connection closes after it)."""
    body = json.dumps({"error": error.message, "reason": error.reason, "message": error.message}).encode()
    return response(error.status, body, close=True)
