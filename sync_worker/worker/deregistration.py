"""Removing the worker registration at the end of shutdown (§3.3).

Fenced (the server advertises ``worker_deregistration_fencing``): the same registration
token is retried on transport loss (``min(1, 0.1·2^min(n,4))`` s) and on the server's
identity-preserving 503 transient (its ``retry_after_seconds``), all inside the original
shutdown deadline. Unfenced: one legacy ``DELETE``, never replayed. Authentication,
protocol and other HTTP refusals are raised as they are; running out of deadline raises
``RuntimeError`` ("registration removal is unconfirmed").
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Optional

from ..errors import ServerError, TransportError
from ..protocol import WorkerPlane
from ..protocol.refusals import deregistration_retry_delay

__all__ = ["DeregistrationUnconfirmed", "deregister", "fenced_transport_delay"]

logger = logging.getLogger("sync_worker.worker.lifecycle")


class DeregistrationUnconfirmed(RuntimeError):
    """The shutdown deadline ended before the server confirmed the registration's removal."""


def fenced_transport_delay(attempt: int) -> float:
    """Delay before re-sending the same fenced deregistration after transport loss ``attempt`` (0-based)."""
    return float(min(1.0, 0.1 * 2 ** min(attempt, 4)))


def deregister(
    client: WorkerPlane,
    *,
    worker_id: str,
    registration_token: Optional[str],
    deadline: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> Dict[str, Any]:
    """Deregister within ``deadline`` (monotonic); returns the server's receipt."""
    remaining = deadline - clock()
    if remaining <= 0:
        raise DeregistrationUnconfirmed(
            f"worker {worker_id}: the shutdown deadline passed during drain; registration removal is unconfirmed"
        )
    if registration_token is None:
        try:
            receipt: Dict[str, Any] = client.deregister_worker_legacy(worker_id, timeout=remaining)
        except TransportError as error:
            raise DeregistrationUnconfirmed(
                f"worker {worker_id}: legacy deregistration got no response ({type(error).__name__}); "
                "registration removal is unconfirmed"
            ) from error
        return receipt

    transport_failures = 0
    while True:
        remaining = deadline - clock()
        if remaining <= 0:
            raise DeregistrationUnconfirmed(
                f"worker {worker_id}: shutdown deadline reached; registration removal is unconfirmed"
            )
        try:
            fenced: Dict[str, Any] = client.deregister_worker_fenced(
                worker_id, registration_token, timeout=remaining
            )
            return fenced
        except TransportError as error:
            delay = fenced_transport_delay(transport_failures)
            transport_failures += 1
            last: BaseException = error
        except ServerError as error:
            server_delay = deregistration_retry_delay(error, worker_id, registration_token)
            if server_delay is None:
                raise
            delay = float(server_delay)
            last = error
        if clock() + delay >= deadline:
            raise DeregistrationUnconfirmed(
                f"worker {worker_id}: retrying deregistration would pass the shutdown deadline "
                f"({type(last).__name__}); registration removal is unconfirmed"
            ) from last
        logger.info("worker %s deregistration not confirmed (%s); retrying in %.2f s",
                    worker_id, type(last).__name__, delay)
        sleep(delay)
