"""Control-plane calls on the stdlib socket pool (``Client(control_plane_transport="stdlib")``, what the
Celery facade publishes through, the default): the same requests, answers and typed errors as the
requests session, against a scripted server and the real dev server, over real sockets."""

from __future__ import annotations

import socket
from typing import Callable, Iterator, List, Tuple

import pytest

from sync_worker import errors
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from tests._misbehaving import MisbehavingServer, RawRequest, json_response, serving

Serve = Callable[..., MisbehavingServer]


@pytest.fixture
def serve() -> Iterator[Serve]:
    yield from serving()


def test_the_default_control_plane_is_stdlib() -> None:
    assert Client("http://127.0.0.1:1").control_plane_transport == "stdlib"
    twin = Client("http://127.0.0.1:1", control_plane_transport="requests").clone()
    assert twin.control_plane_transport == "requests"
    with pytest.raises(ValueError, match="control_plane_transport"):
        Client("http://127.0.0.1:1", control_plane_transport="urllib3")


@pytest.mark.parametrize("via", ["requests", "stdlib"])
def test_same_request_and_keep_alive_on_both(serve: Serve, via: str) -> None:
    peers: List[Tuple[str, int]] = []

    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        peers.append(conn.getpeername())
        json_response(server, conn, {"workflows": [], "next_page_token": None})

    server = serve(script)
    client = Client(server.url, token="secret", namespace="ns1", transport_retries=1, control_plane_transport=via)
    for _ in range(5):
        client.list_workflows(workflow_type="orders")
    assert len(peers) == 5 and len(set(peers)) == 1  # one keep-alive connection carried them
    first = server.requests[0]
    assert first.method == "GET" and first.path.startswith("/api/workflows?")
    assert "workflow_type=orders" in first.path
    assert first.headers["authorization"] == "Bearer secret"
    assert first.headers["x-namespace"] == "ns1"
    assert "x-durable-workflow-control-plane-version" in first.headers


@pytest.mark.parametrize("via", ["requests", "stdlib"])
def test_error_statuses_are_the_same_typed_errors(serve: Serve, via: str) -> None:
    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        json_response(server, conn, {"message": "no such workflow", "reason": "workflow_not_found"}, status=404)

    client = Client(serve(script).url, transport_retries=1, control_plane_transport=via)
    with pytest.raises(errors.ServerError) as caught:
        client.describe_workflow("missing")
    assert caught.value.status == 404 and caught.value.reason() == "workflow_not_found"


def test_start_and_describe_on_the_dev_server() -> None:
    with DevServer(port=0, db=":memory:") as server:
        ours = Client(server.url, control_plane_transport="stdlib")
        theirs = Client(server.url)
        ours.start_activity("demo.add", 1, 2, task_queue="cps", activity_id="act-1")
        assert ours.describe_activity("act-1") == theirs.describe_activity("act-1")
        info = ours.cluster_info(refresh=True)
        assert info["worker_protocol"] == theirs.cluster_info(refresh=True)["worker_protocol"]
        with pytest.raises(errors.ServerError) as caught:
            ours.describe_activity("no-such-activity")
        assert caught.value.status == 404


def test_a_request_larger_than_one_send_arrives_whole(serve: Serve) -> None:
    seen: List[int] = []

    def script(server: MisbehavingServer, conn: socket.socket, request: RawRequest) -> None:
        seen.append(len(request.body))
        json_response(server, conn, {"ok": True})

    client = Client(serve(script).url, transport_retries=1, control_plane_transport="stdlib")
    big = "x" * (8 * 1024 * 1024)  # far past a loopback socket's send buffer
    assert client.request("POST", "/echo", body={"blob": big}) == {"ok": True}
    assert seen == [len('{"blob":""}') + len(big)]
