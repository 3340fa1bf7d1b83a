"""Bridge adapters: an external system's event (a webhook) turned into a workflow command by the server."""

from __future__ import annotations

from typing import Any, Dict, Optional

from .. import errors
from .base import ClientBase, segment
from .results.bridge import BridgeAdapterOutcome
from .transport import RetryMode


class BridgeMixin(ClientBase):
    """``POST /bridge-adapters/webhook/{adapter}``."""

    def send_webhook_bridge_event(self, adapter: str, *, action: str, idempotency_key: str, target: Dict[str, Any],
                                  input: Optional[Dict[str, Any]] = None,
                                  correlation: Optional[Dict[str, Any]] = None) -> BridgeAdapterOutcome:
        """Send one webhook event; a rejection (HTTP 422 with an outcome) is returned, not raised.

        ``idempotency_key`` makes a resent event the same event, so transport retries are safe.
        """
        body: Dict[str, Any] = {"action": action, "idempotency_key": idempotency_key, "target": dict(target)}
        if input is not None:
            body["input"] = input
        if correlation is not None:
            body["correlation"] = dict(correlation)
        try:
            data = self._call("control", "POST", f"/bridge-adapters/webhook/{segment(adapter)}",
                              route="/bridge-adapters/webhook/{adapter}", body=body, retry=RetryMode.SAFE,
                              operation="bridge.webhook")
        except errors.ServerError as exc:
            if exc.status == 422 and isinstance(exc.body, dict) and "outcome" in exc.body:
                data = exc.body
            else:
                raise
        return BridgeAdapterOutcome.from_dict(data)
