"""``SyncWorkerInstrumentor().instrument()``: tracing for every Client, Worker and nestjs step of the process."""

from __future__ import annotations

from typing import Any, Collection, Optional

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from ... import instrumentation
from ._tracing import TracingInterceptor

__all__ = ["SyncWorkerInstrumentor"]


class SyncWorkerInstrumentor(BaseInstrumentor):  # type: ignore[misc]  # untyped base class
    """The OpenTelemetry way to turn tracing on, as ``CeleryInstrumentor`` does for Celery.

    ``instrument(tracer_provider=None, trace_runs=False)`` installs one :class:`TracingInterceptor` as the process's
    worker interceptor (outermost, before each worker's own), client hook and nestjs step
    interceptor; workers and clients built earlier are covered from their next task or call.
    ``uninstrument()`` removes it. Like every ``BaseInstrumentor``, the class is a singleton and a
    second ``instrument()`` is a no-op.
    """

    _interceptor: Optional[TracingInterceptor] = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()  # sync_worker itself is the instrumented library: nothing else to check

    def _instrument(self, **kwargs: Any) -> None:
        interceptor = TracingInterceptor(kwargs.get("tracer_provider"), trace_runs=bool(kwargs.get("trace_runs")))
        instrumentation.install_worker_interceptor(interceptor)
        instrumentation.install_client_hook(interceptor.client_call)
        instrumentation.install_step_interceptor(interceptor)
        self._interceptor = interceptor

    def _uninstrument(self, **kwargs: Any) -> None:
        interceptor, self._interceptor = self._interceptor, None
        if interceptor is not None:
            instrumentation.uninstall(interceptor)
            instrumentation.uninstall(interceptor.client_call)

    @property
    def interceptor(self) -> Optional[TracingInterceptor]:
        """The installed interceptor (None when not instrumented)."""
        return self._interceptor
