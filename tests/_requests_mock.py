"""For tests where ``responses`` plays the server behind the CLI: ``responses`` mocks requests, so
the clients the CLI builds send their control plane through requests (the default is the stdlib
socket pool, which ``responses`` cannot see)."""

from __future__ import annotations

from typing import Any

import pytest

from sync_worker.host.client_options import ClientOptions

__all__ = ["control_plane_on_requests"]


@pytest.fixture
def control_plane_on_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ClientOptions.build_client

    def build(self: ClientOptions, client_class: Any = None, **extra: Any) -> Any:
        extra.setdefault("control_plane_transport", "requests")
        return original(self, client_class, **extra)

    monkeypatch.setattr(ClientOptions, "build_client", build)
