"""A tiny scripted socket server that misbehaves on purpose (drips bytes, sends huge bodies,
empty 200s, cuts connections), for transport and runtime tests over real sockets — in the
manner of urllib3's own test servers.

Each accepted connection reads one request (head and ``Content-Length`` body), then hands the
socket to ``script(conn, request)``; the script writes whatever it likes. ``sent`` counts the
bytes scripts wrote, so a test can prove the client stopped reading early.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional


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
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
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
        self._listener.close()
        self._thread.join(2)


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
