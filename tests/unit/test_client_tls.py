"""``Client(tls_context=...)``: the caller's ``ssl.SSLContext`` decides trust, over a real TLS socket.

A throwaway CA (trustme) signs the certificate of a loopback HTTPS server. A context that trusts
that CA connects; the default trust (requests' CA bundle) refuses; the caller's context is used
as given (requests' bundle is never loaded into it).
"""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator, Tuple

import pytest

from sync_worker import errors
from sync_worker.client import Client

trustme = pytest.importorskip("trustme", reason="trustme (dev extra) makes the throwaway certificate authority")


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"status": "serving", "tls": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def tls_server() -> Iterator[Tuple[str, trustme.CA]]:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    httpd.socket = server_context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}", ca
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_context_trusting_the_ca_connects_and_is_used_as_given(tls_server: Tuple[str, trustme.CA]) -> None:
    url, ca = tls_server
    context = ssl.create_default_context()
    context.load_verify_locations(cadata=ca.cert_pem.bytes().decode())
    before = context.cert_store_stats()
    with Client(url, tls_context=context, transport_retries=1) as client:
        assert client.health() == {"status": "serving", "tls": True}
        assert client.clone().health()["tls"] is True
    assert context.cert_store_stats() == before  # no CA bundle was added to the caller's context


def test_without_the_ca_the_server_is_refused(tls_server: Tuple[str, trustme.CA]) -> None:
    url, _ = tls_server
    with Client(url, transport_retries=1) as client, pytest.raises(errors.TransportError):
        client.health()
    stranger = ssl.create_default_context()
    with Client(url, tls_context=stranger, transport_retries=1) as client, pytest.raises(errors.TransportError):
        client.health()


def test_tls_context_must_be_an_ssl_context() -> None:
    with pytest.raises(TypeError, match=r"ssl\.SSLContext"):
        Client("https://127.0.0.1:1", tls_context="/etc/ssl/certs")  # type: ignore[arg-type]
