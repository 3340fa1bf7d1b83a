"""A fast fake worker-plane server for throughput benches: never the bottleneck, and it says so.

It replays real dev-server response shapes (captured from an in-process ``DevServer`` by
:func:`capture_shapes`) over a single-threaded ``selectors`` loop with HTTP/1.1 keep-alive, so
a worker under test pays its own HTTP cost and the server's share stays small. It hands out
``--tasks`` no-op activity tasks, one per activity poll, each with fresh ids; workflow and query
polls (and activity polls once the tasks are gone) are parked, never answered, as a long poll is.

Run as a child process: ``python3 bench/fake_worker_server.py SHAPES.json TASKS``; it prints
``PORT <n>``, and on SIGTERM a ``STATS {...}`` line with its own CPU seconds and the completion
timestamps it saw.
"""

from __future__ import annotations

import json
import os
import resource
import selectors
import signal
import socket
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

NOOP_TYPE = "bench.noop"


def capture_shapes() -> Dict[str, Any]:
    """Real dev-server bodies for discovery, registration, heartbeat, an activity task and its completion."""
    from sync_worker import Client
    from sync_worker.devserver import DevServer

    with DevServer(port=0, db=":memory:") as server:
        client = Client(server.url)
        shapes: Dict[str, Any] = {"cluster_info": client.cluster_info()}
        worker_id = "bench-capture"
        body = {"worker_id": worker_id, "task_queue": "capture", "runtime": "python",
                "supported_activity_types": [NOOP_TYPE], "supported_workflow_types": []}
        shapes["register"] = client._call("worker", "POST", "/worker/register", route="/worker/register", body=body)
        shapes["heartbeat"] = client._call("worker", "POST", "/worker/heartbeat", route="/worker/heartbeat",
                                           body={"worker_id": worker_id})
        client.start_activity(NOOP_TYPE, task_queue="capture")
        poll = client._call("worker", "POST", "/worker/activity-tasks/poll", route="/poll",
                            body={"worker_id": worker_id, "task_queue": "capture", "timeout_seconds": 5}, poll=True)
        shapes["activity_poll"] = poll
        task = poll["task"]
        shapes["activity_complete"] = client._call(
            "worker", "POST", f"/worker/activity-tasks/{task['task_id']}/complete", route="/complete",
            body={"activity_attempt_id": task["activity_attempt_id"], "lease_owner": worker_id, "result": None})
        shapes["deregister"] = client.deregister_worker_fenced(
            worker_id, shapes["register"]["registration_token"], timeout=5.0)
    return shapes


class _Server:
    def __init__(self, shapes: Dict[str, Any], tasks: int) -> None:
        self.shapes = shapes
        self.tasks = tasks
        self.issued = 0
        self.completed: List[float] = []
        self.protocol = str(shapes["cluster_info"].get("worker_protocol", {}).get("version", "1.20"))
        self.selector = selectors.DefaultSelector()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(256)
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.buffers: Dict[socket.socket, bytearray] = {}
        self.parked: List[socket.socket] = []
        self.static = {key: json.dumps(value).encode() for key, value in shapes.items() if key != "activity_poll"}
        self.poll_template = shapes["activity_poll"]
        self.stopping = False

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def serve(self) -> None:
        while not self.stopping:
            for key, _ in self.selector.select(0.5):
                if key.data is None:
                    self._accept()
                else:
                    self._readable(key.fileobj)  # type: ignore[arg-type]

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffers[conn] = bytearray()
        self.selector.register(conn, selectors.EVENT_READ, "conn")

    def _close(self, conn: socket.socket) -> None:
        self.selector.unregister(conn)
        self.buffers.pop(conn, None)
        conn.close()

    def _readable(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        buffer = self.buffers[conn]
        buffer += data
        while True:
            request = _take_request(buffer)
            if request is None:
                return
            method, path, body = request
            answer = self._answer(method, path, body)
            if answer is None:  # a parked long poll: no answer until the worker gives up on it
                self.parked.append(conn)
                self.selector.unregister(conn)
                return
            conn.setblocking(True)
            conn.sendall(answer)
            conn.setblocking(False)

    def _answer(self, method: str, path: str, body: bytes) -> Optional[bytes]:
        if path.endswith("/cluster/info"):
            return _response(self.static["cluster_info"], self.protocol)
        if path.endswith("/worker/register") or path.endswith("/worker/heartbeat") or path.endswith("/deregister"):
            key = path.rsplit("/", 1)[1]
            answer = dict(self.shapes[key])
            try:  # the acknowledgement names the worker that asked
                asked = json.loads(body)
            except ValueError:
                asked = {}
            if key == "deregister":
                asked["worker_id"] = path.split("/registrations/", 1)[1].split("/", 1)[0]
            for field in ("worker_id", "task_queue", "registration_token"):
                if field in answer and field in asked:
                    answer[field] = asked[field]
            return _response(json.dumps(answer).encode(), self.protocol, 201 if key == "register" else 200)
        if path.endswith("/activity-tasks/poll"):
            if self.issued >= self.tasks:
                return None
            self.issued += 1
            envelope = dict(self.poll_template)
            task = dict(envelope["task"])
            task["task_id"] = f"task-{self.issued}"
            task["activity_attempt_id"] = task["attempt_id"] = f"attempt-{self.issued}"
            task["activity_execution_id"] = f"exec-{self.issued}"
            try:
                asked = json.loads(body)
            except ValueError:
                asked = {}
            task["lease_owner"] = asked.get("worker_id", task.get("lease_owner"))
            task["task_queue"] = asked.get("task_queue", task.get("task_queue"))
            envelope["task"] = task
            return _response(json.dumps(envelope).encode(), self.protocol)
        if path.endswith("/complete") and "/activity-tasks/" in path:
            self.completed.append(time.monotonic())
            return _response(self.static["activity_complete"], self.protocol)
        if "/poll" in path:  # workflow and query polls: held, as a quiet long poll is
            return None
        return _response(b'{"reason":"route_not_found"}', self.protocol, 404)


def _take_request(buffer: bytearray) -> Optional[Tuple[str, str, bytes]]:
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buffer[:end]).decode("latin-1")
    lines = head.split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    total = end + 4 + length
    if len(buffer) < total:
        return None
    body = bytes(buffer[end + 4:total])
    del buffer[:total]
    return method, path.split("?", 1)[0], body


_REASONS = {200: "OK", 201: "Created", 404: "Not Found"}


def _response(body: bytes, protocol: str, status: int = 200) -> bytes:
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nX-Durable-Workflow-Protocol-Version: {protocol}\r\n\r\n")
    return head.encode("latin-1") + body


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        shapes = json.load(handle)
    server = _Server(shapes, int(sys.argv[2]))

    def stop(signum: int, frame: Any) -> None:
        server.stopping = True

    signal.signal(signal.SIGTERM, stop)
    print(f"PORT {server.port}", flush=True)
    server.serve()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    done = server.completed
    print("STATS " + json.dumps({"cpu_seconds": usage.ru_utime + usage.ru_stime, "completed": len(done),
                                  "first_done": done[0] if done else None, "last_done": done[-1] if done else None}),
          flush=True)


if __name__ == "__main__":
    main()
