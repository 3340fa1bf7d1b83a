"""A local Sentry ingest endpoint for tests: the real SDK in another process sends its envelopes here
(DSN ``http://public@127.0.0.1:<port>/1``) over a real socket; the events are kept in memory."""

import gzip
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sentry_sdk.envelope import Envelope


class SentryIngest:
    def __init__(self):
        self.events = []
        self.lock = threading.Lock()
        ingest = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                elif encoding == "br":
                    import brotli  # the SDK compresses with brotli only when it is installed

                    body = brotli.decompress(body)
                for item in Envelope.deserialize(body).items:
                    if item.type == "event" and item.payload.json is not None:
                        with ingest.lock:
                            ingest.events.append(item.payload.json)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def dsn(self):
        return f"http://public@127.0.0.1:{self.server.server_address[1]}/1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
