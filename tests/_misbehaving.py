"""A tiny scripted socket server that misbehaves on purpose (drips bytes, sends huge bodies,
empty 200s, cuts connections), for transport and runtime tests over real sockets — in the
manner of urllib3's own test servers.

Each accepted connection reads one request (head and ``Content-Length`` body), then hands the
socket to ``script(conn, request)``; the script writes whatever it likes. ``sent`` counts the
bytes scripts wrote, so a test can prove the client stopped reading early.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple


@dataclass
class RawRequest:
    method: str
    path: str
    headers: Dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


Script = Callable[[socket.socket, RawRequest], None]


@dataclass
class MisbehavingServer:
    script: Script
    requests: List[RawRequest] = field(default_factory=list)
    sent: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.port = 0
        self._lock = threading.Lock()
        self._connections: List[socket.socket] = []
        self._listen()
        self.url = f"http://127.0.0.1:{self.port}"

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.2)
        self.port = int(listener.getsockname()[1])
        self._listener = listener
        self._down = threading.Event()
        self._thread = threading.Thread(target=self._accept, args=(listener, self._down), daemon=True)
        self._thread.start()

    def go_down(self) -> None:
        """An outage: stop listening (connection refused) and cut every open connection."""
        self._down.set()
        self._listener.close()
        self._thread.join(2)
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def come_up(self) -> None:
        """Listen again on the same port."""
        self._listen()

    def _accept(self, listener: socket.socket, down: threading.Event) -> None:
        while not self.stop.is_set() and not down.is_set():
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self._connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(30)
            while not self.stop.is_set():
                request = _read_request(conn)
                if request is None:
                    return
                with self._lock:
                    self.requests.append(request)
                self.script(conn, request)
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        with self._lock:
            self.sent += len(data)

    def close(self) -> None:
        self.stop.set()
        self.go_down()


def _read_request(conn: socket.socket) -> Optional[RawRequest]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        rest += chunk
    return RawRequest(method, path, headers, rest[:length])


def response_head(status: int = 200, length: Optional[int] = None, extra: str = "") -> bytes:
    lines = [f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if extra:
        lines.append(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def json_response(server: MisbehavingServer, conn: socket.socket, body: Any, status: int = 200) -> None:
    data = json.dumps(body).encode()
    server.send(conn, response_head(status, len(data)) + data)


def drip(server: MisbehavingServer, conn: socket.socket, data: bytes, every: float) -> None:
    """Send ``data`` one byte at a time, ``every`` seconds apart (until the peer goes away)."""
    for index in range(len(data)):
        if server.stop.is_set():
            return
        server.send(conn, data[index:index + 1])
        time.sleep(every)


def forward(upstream: str, request: RawRequest, timeout: float = 90.0) -> Tuple[int, Dict[str, str], bytes]:
    """Send ``request`` on to ``upstream`` (an ``http://host:port`` origin); return its answer."""
    host, _, port = upstream.split("//", 1)[1].partition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        headers = {k: v for k, v in request.headers.items() if k not in ("host", "connection", "content-length")}
        conn.request(request.method, request.path, body=request.body or None, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


class FaultProxy:
    """A pass-through proxy in front of a real server, with scripted faults.

    ``override(method, path_prefix)`` returns a function's answer instead of the upstream's
    (``None`` from the function passes the request through); ``go_down``/``come_up`` simulate
    an outage (connection refused, open connections cut); ``status_for`` answers a fixed status.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.overrides: List[Tuple[str, str, Callable[[RawRequest], Optional[Tuple[int, bytes]]]]] = []
        self.fail_status: Optional[int] = None
        self.server = MisbehavingServer(self._handle)
        self.url = self.server.url

    def override(self, method: str, prefix: str, fn: Callable[[RawRequest], Optional[Tuple[int, bytes]]]) -> None:
        self.overrides.append((method, prefix, fn))

    def _handle(self, conn: socket.socket, request: RawRequest) -> None:
        answer: Optional[Tuple[int, bytes]] = None
        if self.fail_status is not None and not request.path.startswith("/api/health"):
            answer = (self.fail_status, json.dumps({"reason": "proxy_error", "error": "bad gateway"}).encode())
        for method, prefix, fn in list(self.overrides):
            if answer is None and request.method == method and request.path.startswith(prefix):
                answer = fn(request)
        if answer is None:
            status, headers, body = forward(self.upstream, request)
            extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items()
                            if k.startswith("x-durable-workflow") or k == "retry-after")
            head = (f"HTTP/1.1 {status} X\r\nContent-Type: {headers.get('content-type', 'application/json')}\r\n"
                    f"Content-Length: {len(body)}\r\n{extra}\r\n").encode()
            self.server.send(conn, head + body)
            return
        status, body = answer
        self.server.send(conn, response_head(status, len(body)) + body)

    def go_down(self) -> None:
        self.server.go_down()

    def come_up(self) -> None:
        self.server.come_up()

    def close(self) -> None:
        self.server.close()


ServerScript = Callable[["MisbehavingServer", socket.socket, RawRequest], None]


def serving() -> Iterator[Callable[[ServerScript], MisbehavingServer]]:
    """The body of a ``serve`` fixture: ``serve(script)`` starts a server whose script also gets
    the server itself; every server started is closed at teardown."""
    servers: List[MisbehavingServer] = []

    def start(script: ServerScript) -> MisbehavingServer:
        holder: List[MisbehavingServer] = []
        server = MisbehavingServer(lambda conn, request: script(holder[0], conn, request))
        holder.append(server)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()
