"""Start-up against a server that is not there yet (or refuses us): retry, then say why.

A worker started before its server, or with a wrong token, used to exit at once with
``Server compatibility error: unable to read /api/cluster/info: TransportError``. Now
discovery and registration are retried on the poll back-off schedule (1 s doubling to 30 s,
jittered) for up to ``max_startup_wait`` seconds, each failure is logged with its cause, and
the final error names the URL and the cause in words an operator can act on:

* connection refused: nothing listens there (is the server running, is the URL right?);
* DNS: the host name does not resolve;
* timeout: something swallowed the request (firewall, proxy);
* HTTP 401: the credentials were rejected: check the token;
* HTTP 403: the token is not allowed on the worker plane (a control-plane token?);
* other HTTP statuses with the server's ``reason``.

A genuine incompatibility (protocol versions) is not retried: waiting will not fix it. Neither
is a URL that reaches some other HTTP server (404, or not the cluster-info document at
``/api/cluster/info``): that is reported as "not a Durable Workflow server", naming the URL.

The final error's first words say which kind of problem it is: ``Credentials error`` (401/403),
``Cannot reach the Durable Workflow server`` (transport), ``Server unavailable`` (5xx, 408, 429),
``Not a Durable Workflow server``; ``Server compatibility error`` is kept for real incompatibilities.
"""

from __future__ import annotations

import logging
import random
import socket
from typing import Callable, List, Optional, TypeVar

from ..errors import Forbidden, ServerError, TransportError, Unauthorized, WorkerShutdown

__all__ = ["StartupFailed", "describe_cause", "not_a_server", "retry_startup"]

logger = logging.getLogger("sync_worker.worker")

T = TypeVar("T")


class StartupFailed(RuntimeError):
    """The worker could not start: discovery or registration kept failing (message says why)."""


def _chain(error: BaseException) -> List[BaseException]:
    seen: List[BaseException] = []
    current: Optional[BaseException] = error
    while current is not None and current not in seen:
        seen.append(current)
        reason = getattr(current, "reason", None)
        nested = reason if isinstance(reason, BaseException) else None
        if nested is None:
            nested = next((a for a in getattr(current, "args", ()) if isinstance(a, BaseException)), None)
        current = nested or current.__cause__ or current.__context__
    return seen


def describe_cause(error: BaseException) -> str:
    """An operator's description of why a request to the server failed (never credentials)."""
    if isinstance(error, Unauthorized) or (isinstance(error, ServerError) and error.status == 401):
        return "HTTP 401: the server rejected the credentials; check the token (--token / DURABLE_WORKFLOW_AUTH_TOKEN)"
    if isinstance(error, Forbidden) or (isinstance(error, ServerError) and error.status == 403):
        return ("HTTP 403: the token is not allowed to call the worker plane; use a worker (or shared) token, "
                "not a control-plane one")
    if isinstance(error, ServerError):
        reason = error.reason()
        return f"HTTP {error.status}" + (f" ({reason[:80]})" if reason else "")
    if isinstance(error, TransportError):
        chain = _chain(error)
        names = {type(e).__name__ for e in chain}
        if any(isinstance(e, socket.gaierror) for e in chain) or "NameResolutionError" in names:
            return "DNS lookup failed: the host name does not resolve"
        if any(isinstance(e, ConnectionRefusedError) for e in chain):
            return "connection refused: is the server running, and is the URL right?"
        if getattr(error, "deadline_exceeded", False) or error.timeout:
            return "timed out: no answer in time (a firewall or proxy in the way?)"
        if error.connect:
            return "could not connect"
        return "the connection failed before an answer arrived"
    return type(error).__name__


def _headline(error: BaseException, url: str) -> str:
    if isinstance(error, (Unauthorized, Forbidden)) or (isinstance(error, ServerError) and error.status in (401, 403)):
        return f"Credentials error: the server at {url} refused the worker's credentials"
    if isinstance(error, TransportError):
        return f"Cannot reach the Durable Workflow server: unable to read {url}/api/cluster/info or register"
    return f"Server unavailable: unable to read {url}/api/cluster/info or register"


def not_a_server(error: BaseException, url: str) -> Optional[StartupFailed]:
    """The URL answers, but not as a Durable Workflow server: a 404 or a body that is not the
    cluster-info document at ``/api/cluster/info`` (None: anything else)."""
    if not isinstance(error, ServerError) or error.route != "/cluster/info":
        return None
    reason = error.reason() if error.status != 404 else None
    if error.status != 404 and reason not in ("invalid_json_response", "invalid_cluster_info"):
        return None
    answered = f"HTTP {error.status}" if error.status == 404 else "a body that is not its cluster-info JSON"
    return StartupFailed(
        f"Not a Durable Workflow server: {url}/api/cluster/info answered {answered}. Check --server-url / "
        "DURABLE_WORKFLOW_SERVER_URL: it is the server's base URL (for example http://127.0.0.1:7233), "
        "without /api.")


def _retryable(error: BaseException) -> bool:
    """Unreachable, overloaded or not (yet) authorized; a refusal of the request itself is final."""
    if isinstance(error, TransportError):
        return True
    return isinstance(error, ServerError) and (error.status >= 500 or error.status in (401, 403, 408, 429))


def retry_startup(attempt: Callable[[], T], *, url: str, max_wait: float, clock: Callable[[], float],
                  wait: Callable[[float], bool], rng: Optional[Callable[[float, float], float]] = None) -> T:
    """Run ``attempt`` until it succeeds or ``max_wait`` seconds have passed.

    ``wait(seconds)`` sleeps and returns True when the worker was asked to stop meanwhile.
    Raises :class:`StartupFailed` naming ``url`` and the cause (chained to the last error).
    """
    uniform = rng or random.uniform
    started = clock()
    ceiling = 1.0
    attempts = 0
    last_cause: Optional[str] = None
    while True:
        attempts += 1
        try:
            return attempt()
        except (WorkerShutdown, RuntimeError):
            raise
        except Exception as error:
            other_server = not_a_server(error, url)
            if other_server is not None:
                raise other_server from error
            if not _retryable(error):
                raise
            cause = describe_cause(error)
            elapsed = clock() - started
            delay = uniform(ceiling / 2.0, ceiling)
            ceiling = min(30.0, ceiling * 2.0)
            if elapsed >= max_wait:
                raise StartupFailed(
                    f"{_headline(error, url)}: {cause} "
                    f"(gave up after {attempts} attempt(s) over {elapsed:.1f} s; --max-startup-wait is "
                    f"{max_wait:g} s)") from error
            delay = min(delay, max_wait - elapsed)  # the last attempt is made at the deadline
            if cause != last_cause:
                logger.warning("cannot start yet: %s at %s; retrying (for up to %g s)", cause, url, max_wait)
                last_cause = cause
            if wait(delay):
                raise WorkerShutdown("stopped while waiting for the server at start-up") from error
