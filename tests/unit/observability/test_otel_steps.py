"""The nestjs step span: it continues the engine's traceparent and marks a failed step (no broker needed)."""

from __future__ import annotations

from typing import Any, Dict

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from sync_worker import instrumentation
from sync_worker.contrib.opentelemetry import TracingInterceptor
from sync_worker.nestjs.steps import StepWorker

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_step_continues_the_engines_traceparent() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    interceptor = TracingInterceptor(provider)
    steps = StepWorker()

    @steps.step("charge")
    def charge(payload: Dict[str, int]) -> Dict[str, Any]:
        amount = payload["amount"]
        if amount < 0:
            raise ValueError("negative amount")
        return {"charged": amount}

    instrumentation.install_step_interceptor(interceptor)
    try:
        for amount in (5, -1):
            task = {"runId": "run-1", "seq": 1, "name": "charge", "input": {"amount": amount}, "attempt": 2,
                    "traceparent": TRACEPARENT}
            instrumentation.run_step(task, lambda t: steps.process_task(t))
    finally:
        instrumentation.uninstall(interceptor)
    ok, failed = exporter.get_finished_spans()
    for span in (ok, failed):
        assert span.name == "RunStep:charge" and span.context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
        assert span.parent is not None and span.parent.span_id == 0x00F067AA0BA902B7
        assert (span.attributes or {})["step_attempt_number"] == 2
    assert ok.status.status_code is StatusCode.UNSET and failed.status.status_code is StatusCode.ERROR
