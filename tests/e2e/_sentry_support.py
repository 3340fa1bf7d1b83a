"""A Sentry transport that keeps events in memory (Sentry's own test pattern), and its setup."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List

import sentry_sdk
from sentry_sdk.envelope import Envelope
from sentry_sdk.transport import Transport


class CapturingTransport(Transport):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.events: List[Dict[str, Any]] = []

    def capture_envelope(self, envelope: Envelope) -> None:
        for item in envelope.items:
            if item.type == "event" and item.payload.json is not None:
                with self.lock:
                    self.events.append(item.payload.json)


@contextmanager
def sentry_capturing(**options: Any) -> Iterator[CapturingTransport]:
    """``sentry_sdk.init`` with a capturing transport for the block; closed (inactive) after it."""
    transport = CapturingTransport()
    client = sentry_sdk.init(dsn="https://public@sentry.invalid/1", transport=transport, **options)
    try:
        yield transport
    finally:
        sentry_sdk.get_client().close()
        del client
