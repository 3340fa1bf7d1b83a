"""Process-wide hooks for observability integrations (OpenTelemetry, Sentry, your own).

``Worker(..., interceptors=[...])`` wires an interceptor into one worker. An *instrumentation*
(``sync_worker.contrib.opentelemetry.SyncWorkerInstrumentor().instrument()``, Sentry's
``SyncWorkerIntegration``) must reach every worker and client of the process, including those
built before it was turned on, so it installs hooks here instead:

* **worker interceptors** (:func:`install_worker_interceptor`): the ordinary three-hook
  interceptors of :mod:`sync_worker.interceptors`, run around every task of every ``Worker``
  of the process, outside the worker's own interceptors (installed first = outermost);
* **client call hooks** (:func:`install_client_hook`): ``hook(call, next)`` around the client calls
  that act on a workflow (start, signal, update, query, cancel); a hook may change the request
  body (``next(dataclasses.replace(call, body=...))``), e.g. to add the trace-context carrier;
* **step interceptors** (:func:`install_step_interceptor`): ``execute_step(task, next)`` around every
  nestjs-durable step the process runs (``next(task)`` returns the wire result).

Hooks are read when a task or call starts, so installing or removing one takes effect for the
next task. Nothing here imports an optional dependency.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Protocol, Tuple

__all__ = [
    "ClientCall",
    "ClientCallHook",
    "StepInterceptor",
    "install_client_hook",
    "install_step_interceptor",
    "install_worker_interceptor",
    "observe_client_call",
    "run_step",
    "step_interceptors",
    "uninstall",
    "worker_interceptors",
]


@dataclass(frozen=True)
class ClientCall:
    """One client call that acts on a workflow.

    ``operation``: ``workflow.start``, ``workflow.signal``, ``workflow.update``, ``workflow.query``,
    ``workflow.cancel`` or ``workflow.terminate``. ``name`` is the signal, update or query name (the
    workflow type for a start). ``body`` is the JSON body about to be sent.
    ``trace_context_supported()`` says whether the server keeps a trace-context carrier
    (:mod:`sync_worker.protocol.trace_context`); it may ask the server once, so call it only when
    there is a carrier to send.
    """

    operation: str
    workflow_id: str
    body: Mapping[str, Any]
    name: Optional[str] = None
    workflow_type: Optional[str] = None
    task_queue: Optional[str] = None
    run_id: Optional[str] = None
    namespace: Optional[str] = None
    trace_context_supported: Callable[[], bool] = field(default=lambda: False, repr=False, compare=False)


#: ``hook(call, next)``: must call ``next(call)`` (or ``next`` with a replaced call) and return its result.
ClientCallHook = Callable[[ClientCall, Callable[[ClientCall], Any]], Any]


class StepInterceptor(Protocol):
    """Wraps one nestjs-durable step: ``next(task)`` runs it and returns the wire result dict."""

    def execute_step(self, task: Mapping[str, Any], next: Callable[[Mapping[str, Any]], Dict[str, Any]]
                     ) -> Dict[str, Any]:
        ...


_lock = threading.Lock()
_worker: Tuple[Any, ...] = ()
_client: Tuple[ClientCallHook, ...] = ()
_steps: Tuple[Any, ...] = ()


def install_worker_interceptor(interceptor: Any) -> None:
    """Run ``interceptor`` around every task of every Worker of this process (idempotent)."""
    global _worker
    from .worker.interception import checked_interceptors  # late: the worker package imports the client

    checked_interceptors([interceptor])  # the same rules as Worker(interceptors=...): sync hooks only
    with _lock:
        if not any(existing is interceptor for existing in _worker):
            _worker = (*_worker, interceptor)


def install_client_hook(hook: ClientCallHook) -> None:
    """Run ``hook`` around every workflow call of every Client of this process (idempotent)."""
    global _client
    if not callable(hook):
        raise TypeError(f"a client hook must be callable, got {type(hook).__name__}")
    with _lock:
        if not any(existing == hook for existing in _client):  # ==: a bound method is a new object per access
            _client = (*_client, hook)


def install_step_interceptor(interceptor: Any) -> None:
    """Run ``interceptor.execute_step`` around every nestjs step of this process (idempotent)."""
    global _steps
    if not callable(getattr(interceptor, "execute_step", None)):
        raise TypeError(f"{type(interceptor).__name__} has no execute_step(task, next)")
    with _lock:
        if not any(existing is interceptor for existing in _steps):
            _steps = (*_steps, interceptor)


def uninstall(hook: Any) -> None:
    """Remove ``hook`` from whichever list holds it (no error when it is not installed)."""
    global _worker, _client, _steps
    with _lock:
        _worker = tuple(x for x in _worker if x is not hook)
        _client = tuple(x for x in _client if x != hook)
        _steps = tuple(x for x in _steps if x is not hook)


def worker_interceptors() -> Tuple[Any, ...]:
    """The installed worker interceptors, outermost first."""
    return _worker


def step_interceptors() -> Tuple[Any, ...]:
    return _steps


def observe_client_call(call: ClientCall, send: Callable[[ClientCall], Any]) -> Any:
    """``send(call)`` wrapped by every installed client hook (the first installed is the outermost)."""
    hooks = _client
    if not hooks:
        return send(call)
    handler = send
    for hook in reversed(hooks):
        handler = _wrap(hook, handler)
    return handler(call)


def _wrap(hook: ClientCallHook, inner: Callable[[ClientCall], Any]) -> Callable[[ClientCall], Any]:
    def call(value: ClientCall) -> Any:
        return hook(value, inner)

    return call


def run_step(task: Mapping[str, Any], core: Callable[[Mapping[str, Any]], Dict[str, Any]]) -> Dict[str, Any]:
    """``core(task)`` wrapped by every installed step interceptor."""
    interceptors = _steps
    handler = core
    for interceptor in reversed(interceptors):
        handler = _wrap_step(interceptor, handler)
    return handler(task)


def _wrap_step(interceptor: Any, inner: Callable[[Mapping[str, Any]], Dict[str, Any]]
               ) -> Callable[[Mapping[str, Any]], Dict[str, Any]]:
    def call(task: Mapping[str, Any]) -> Dict[str, Any]:
        result: Dict[str, Any] = interceptor.execute_step(task, inner)
        return result

    return call
