"""A long poll whose answer is already arriving when the worker stops is read, not thrown away.

The server leases the task when it answers; a worker that shut the socket on an answer it had not
read yet left that task leased to nobody until the lease expired (CI saw it once: a gevent worker
stopped between the server's answer and its poller's read, and drained nothing). The stop now
aborts a poll only when nothing of its answer has arrived (``RequestSlot.abort_unless_answered``);
an arriving answer may take ``POLL_ANSWER_GRACE_SECONDS`` to be read, then the poll is aborted.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any, Callable, Iterator, List

import pytest

from sync_worker import errors
from sync_worker.cancel import CancelToken
from sync_worker.client import Client
from sync_worker.client import transport as transport_module
from sync_worker.client.connections import RequestSlot
from tests._misbehaving import MisbehavingServer, RawRequest, response_head, serving

Serve = Callable[..., MisbehavingServer]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASK = {"task": {"task_id": "at-1", "activity_attempt_id": "attempt-1", "activity_type": "noop",
                 "attempt_number": 1, "arguments": None, "workflow_id": "wf", "run_id": "run"}}


@pytest.fixture
def serve() -> Iterator[Serve]:
    yield from serving()


def _poll(client: Client, cancel: CancelToken) -> Any:
    return client.poll_activity_task(worker_id="w", task_queue="q", poll_request_id="activity-poll-1",
                                     timeout_seconds=20, cancel=cancel)


class _Connection:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock


# -- the slot's decision ----------------------------------------------------------------------------
def test_a_slot_with_bytes_waiting_is_kept_and_one_without_is_shut() -> None:
    ours, theirs = socket.socketpair()
    try:
        slot = RequestSlot()
        slot.attach(_Connection(ours))
        theirs.sendall(b"HTTP/1.1 200 OK\r\n")
        assert slot.abort_unless_answered() is True
        assert not slot.aborted
        theirs.sendall(b"more")  # the socket was left open both ways
        assert ours.recv(64).startswith(b"HTTP/1.1 200 OK")
        silent = RequestSlot()
        silent.attach(_Connection(ours))
        assert silent.abort_unless_answered() is False
        assert silent.aborted
        assert ours.recv(64) == b""  # shut down: reads end at once
    finally:
        ours.close()
        theirs.close()


def test_a_slot_whose_head_was_read_is_kept() -> None:
    ours, theirs = socket.socketpair()
    try:
        slot = RequestSlot()
        slot.attach(_Connection(ours))
        slot.answering = True  # what the stdlib pool notes once the response head is read
        assert slot.abort_unless_answered() is True and not slot.aborted
        unattached = RequestSlot()
        assert unattached.abort_unless_answered() is False and unattached.aborted
    finally:
        ours.close()
        theirs.close()


# -- over real sockets, threads ----------------------------------------------------------------------
def _split_answer(head_sent: threading.Event, go_on: threading.Event) -> Callable[..., None]:
    body = json.dumps(TASK).encode()

    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        server.send(conn, response_head(200, len(body)) + body[:10])
        head_sent.set()
        if go_on.wait(10):
            server.send(conn, body[10:])

    return script


def test_a_stop_while_the_answer_is_half_read_lets_it_finish(serve: Serve) -> None:
    head_sent, go_on = threading.Event(), threading.Event()
    client = Client(serve(_split_answer(head_sent, go_on)).url, timeout=30.0, transport_retries=1)
    token = CancelToken()
    got: List[Any] = []
    poller = threading.Thread(target=lambda: got.append(_poll(client, token)))
    poller.start()
    assert head_sent.wait(10)
    time.sleep(0.2)  # the poller has read the head and waits for the rest of the body
    token.cancel()
    time.sleep(0.2)
    assert poller.is_alive(), "the stop aborted a poll whose answer was arriving"
    go_on.set()
    poller.join(10)
    assert got == [TASK["task"]]


def test_an_answer_that_never_finishes_is_aborted_after_the_grace(serve: Serve,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport_module, "POLL_ANSWER_GRACE_SECONDS", 0.3)
    head_sent, never = threading.Event(), threading.Event()
    client = Client(serve(_split_answer(head_sent, never)).url, timeout=30.0, transport_retries=1)
    token = CancelToken()
    errors_seen: List[BaseException] = []

    def run() -> None:
        try:
            _poll(client, token)
        except BaseException as error:
            errors_seen.append(error)

    poller = threading.Thread(target=run)
    poller.start()
    assert head_sent.wait(10)
    time.sleep(0.2)
    stopped = time.monotonic()
    token.cancel()
    poller.join(10)
    assert not poller.is_alive()
    assert 0.25 <= time.monotonic() - stopped < 3.0
    assert len(errors_seen) == 1 and isinstance(errors_seen[0], errors.WorkerShutdown)
    never.set()


# -- the whole answer waiting unread: greenlets, where the stop can run before the poller reads ------
_GEVENT_SCRIPT = textwrap.dedent("""
    from gevent import monkey
    monkey.patch_all()
    import json, sys
    from gevent.monkey import get_original
    from sync_worker.cancel import CancelToken
    from sync_worker.client import Client
    from tests._misbehaving import MisbehavingServer, json_response

    blocking_sleep = get_original("time", "sleep")
    answer = json.loads(sys.argv[2])
    token = CancelToken()

    def script(conn, request):
        json_response(server, conn, answer)  # the module's server, bound below
        # The whole answer is on its way; without yielding to the hub (so the poller cannot read it),
        # let loopback deliver it, then stop, as a shutdown arriving in that instant would.
        blocking_sleep(0.05)
        token.cancel()

    server = MisbehavingServer(script)
    try:
        client = Client(server.url, timeout=30.0, transport_retries=1, worker_plane_transport=sys.argv[1])
        try:
            got = client.poll_activity_task(worker_id="w", task_queue="q", poll_request_id="activity-poll-1",
                                            timeout_seconds=20, cancel=token)
        except Exception as error:
            got = type(error).__name__
        print(json.dumps({"cancelled": token.cancelled, "got": got}))
    finally:
        server.close()
""")


@pytest.mark.parametrize("via", ["stdlib", "requests"])
def test_a_stop_with_the_whole_answer_unread_hands_the_task_over_under_gevent(via: str) -> None:
    pytest.importorskip("gevent", reason="gevent is not installed: pip install -e '.[dev]' installs it")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", _GEVENT_SCRIPT, via, json.dumps(TASK)], capture_output=True,
                         text=True, timeout=60, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"cancelled": True, "got": TASK["task"]}
