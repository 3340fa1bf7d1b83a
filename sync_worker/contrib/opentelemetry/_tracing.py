"""The tracing interceptor: spans for client calls, workflow, activity, query and nestjs step tasks.

The wire carrier is the published SDK's ``observability_context`` (``protocol/trace_context.py``):
W3C ``traceparent`` (and ``tracestate``, ``baggage``) in, the same out. Only the W3C trace-context
and baggage propagators are used on the wire, whatever the process's global propagator is, so
what we send is what the server and the SDK accept.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from contextlib import ExitStack
from typing import Any, Dict, List, Optional, Tuple

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ...instrumentation import ClientCall
from ...interceptors import (
    ActivityHandler,
    ActivityInterceptorContext,
    PassthroughWorkerInterceptor,
    QueryTaskHandler,
    QueryTaskInterceptorContext,
    WorkflowTaskHandler,
    WorkflowTaskInterceptorContext,
)
from ...protocol.trace_context import carrier_of, context_for

__all__ = ["TracingInterceptor"]

_TRACER_NAME = "sync_worker.contrib.opentelemetry"
_TRACE = TraceContextTextMapPropagator()
_BAGGAGE = W3CBaggagePropagator()
FIELD = "observability_context"

#: client operation -> (span name prefix, whether the body carries the caller's context, as the SDK's)
_CLIENT: Dict[str, Tuple[str, bool]] = {
    "workflow.start": ("StartWorkflow", True),
    "workflow.signal": ("SignalWorkflow", True),
    "workflow.update": ("UpdateWorkflow", True),
    "workflow.cancel": ("CancelWorkflow", True),
    "workflow.query": ("QueryWorkflow", False),
    "workflow.terminate": ("TerminateWorkflow", False),
}
#: commands that start a new run, which continues the trace of the task that sent them
_NEW_RUN_COMMANDS = ("start_child_workflow", "continue_as_new")


def _extract(carrier: Mapping[str, str], base: Optional[otel_context.Context] = None) -> otel_context.Context:
    ctx = _TRACE.extract(carrier, context=base if base is not None else otel_context.Context())
    return _BAGGAGE.extract(carrier, context=ctx)


def inject_current(ctx: Optional[otel_context.Context] = None) -> Optional[Dict[str, Any]]:
    """The v1 ``observability_context`` of ``ctx`` (default: the current one), or None without a valid span."""
    headers: Dict[str, str] = {}
    _TRACE.inject(headers, context=ctx)
    _BAGGAGE.inject(headers, context=ctx)
    return context_for(headers) if "traceparent" in headers else None


def _attrs(**values: Any) -> Dict[str, Any]:
    """Span attributes without the empty ones (OpenTelemetry refuses None)."""
    return {key: value for key, value in values.items() if value is not None and value != ""}


def wire_parent(task: Mapping[str, Any], supported: bool, namespace: Optional[str]
                ) -> Tuple[otel_context.Context, List[Link]]:
    """The parent context a task's span continues, and its links (signal and update callers).

    The run's carrier (``observability_context``) is the parent; without one (a server that
    keeps no trace context) the span starts a trace of its own, as the published SDK's do. The
    links come from ``observability_links`` checked as the SDK checks them (ids must match the task).
    """
    if not supported:
        return otel_context.Context(), []
    carrier = carrier_of(task.get(FIELD))
    parent = _extract(carrier) if carrier is not None else otel_context.Context()
    links: List[Link] = []
    document = task.get("observability_links")
    if isinstance(document, Mapping) and document.get("run_id") == task.get("run_id") \
            and document.get("task_id") == task.get("task_id", task.get("query_task_id")):
        for entry in document.get("links") or []:
            linked = carrier_of(entry.get("context")) if isinstance(entry, Mapping) else None
            if linked is None:
                continue
            span_context = trace.get_current_span(_extract(linked)).get_span_context()
            if span_context.is_valid:
                links.append(Link(span_context, _attrs(**{"durable.link.type": str(entry.get("kind") or ""),
                                                           "command_id": entry.get("command_id")})))
    return parent, links


def run_span_context(run_id: str) -> SpanContext:
    """The stand-in parent of a run's spans when the server keeps no trace context (``trace_runs``).

    Derived from the run id alone, so every worker that runs a task of the run, at any time, puts
    its span in the same trace. Sampled: a run's trace is kept or dropped whole.
    """
    digest = hashlib.sha256(f"sync_worker.run:{run_id}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))


class TracingInterceptor(PassthroughWorkerInterceptor):
    """Spans around every task of a worker, every client call and every nestjs step.

    ``TracingInterceptor(tracer_provider=None, *, trace_runs=False)``: the global tracer provider
    unless one is given. As a worker interceptor it needs nothing else; :meth:`client_call` is the
    client hook and :meth:`execute_step` the nestjs step interceptor (:mod:`sync_worker.instrumentation`).

    ``trace_runs=True``: where the server keeps no trace context (the real server today), the
    spans of one run still form one trace, under a parent derived from the run id
    (:func:`run_span_context`; it is never exported itself, so a trace viewer shows a missing
    root), and the start's client span links to it. Off by default: it forces those traces sampled.
    """

    def __init__(self, tracer_provider: Optional[trace.TracerProvider] = None, *, trace_runs: bool = False) -> None:
        from ... import __version__

        self.tracer = trace.get_tracer(_TRACER_NAME, __version__, tracer_provider)
        self.trace_runs = trace_runs

    def _parent(self, task: Mapping[str, Any], supported: bool, namespace: Optional[str]
                ) -> Tuple[otel_context.Context, List[Link]]:
        parent, links = wire_parent(task, supported, namespace)
        run_id = task.get("run_id")
        if self.trace_runs and isinstance(run_id, str) and run_id \
                and not trace.get_current_span(parent).get_span_context().is_valid:
            parent = trace.set_span_in_context(NonRecordingSpan(run_span_context(run_id)), parent)
        return parent, links

    # -- client -------------------------------------------------------------------------------
    def client_call(self, call: ClientCall, next: Any) -> Any:
        """The client hook: a CLIENT span; the caller's context added to the body where it travels."""
        prefix, carried = _CLIENT.get(call.operation, (call.operation, False))
        name = f"{prefix}:{call.name}" if call.name and call.operation != "workflow.start" else prefix
        if call.operation == "workflow.start" and call.workflow_type:
            name = f"{prefix}:{call.workflow_type}"
        attributes = _attrs(workflow_instance_id=call.workflow_id, workflow_run_id=call.run_id,
                            workflow_type=call.workflow_type, task_queue=call.task_queue, namespace=call.namespace,
                            **{"durable.operation": call.operation, "durable.message_name": call.name
                               if call.operation != "workflow.start" else None})
        with self.tracer.start_as_current_span(name, kind=SpanKind.CLIENT, attributes=attributes) as span:
            sent = False
            if carried and FIELD not in call.body and call.trace_context_supported():
                carrier = inject_current()
                if carrier is not None:
                    call = dataclasses.replace(call, body={**call.body, FIELD: carrier})
                    sent = True
            result = next(call)
            run_id = result.get("run_id") if isinstance(result, Mapping) else None
            if isinstance(run_id, str) and run_id and call.operation == "workflow.start":
                span.set_attribute("workflow_run_id", run_id)
                if self.trace_runs and not sent:  # the run's own trace: reachable from the caller's
                    span.add_link(run_span_context(run_id), {"durable.link.type": "run"})
            return result

    # -- workflow tasks -----------------------------------------------------------------------
    def execute_workflow_task(self, context: WorkflowTaskInterceptorContext, next: WorkflowTaskHandler) -> Any:
        task = context.task
        workflow_type = str(task.get("workflow_type") or "")
        parent, links = self._parent(task, context.observability_supported, context.namespace)
        attributes = _attrs(workflow_instance_id=task.get("workflow_id"), workflow_run_id=task.get("run_id"),
                            workflow_type=workflow_type, task_queue=context.task_queue, namespace=context.namespace,
                            worker_id=context.worker_id, task_id=task.get("task_id"),
                            workflow_task_attempt=task.get("workflow_task_attempt"),
                            **{"durable.resume_source_kind": task.get("resume_source_kind")})
        with ExitStack() as stack:
            if _first_task_of_run(task):  # once per run: the first attempt of its first task
                run_span = self.tracer.start_span(f"RunWorkflow:{workflow_type}", context=parent,
                                                  kind=SpanKind.SERVER, attributes=attributes)
                stack.enter_context(trace.use_span(run_span, end_on_exit=True))
                parent = trace.set_span_in_context(run_span, parent)
            span = self.tracer.start_span(f"WorkflowTask:{workflow_type}", context=parent, links=links,
                                          attributes=attributes)
            with trace.use_span(span, end_on_exit=True):
                outcome = next(context)
                commands = list(getattr(outcome, "commands", None) or [])
                span.set_attribute("durable.commands", len(commands))
                failure = getattr(outcome, "failure", None)
                if failure:
                    span.set_status(Status(StatusCode.ERROR, str(failure.get("message") or "workflow task failed")))
                    span.set_attribute("error.type", str(failure.get("type") or "workflow_task_failed"))
                for command in commands:
                    if isinstance(command, Mapping) and command.get("type") == "fail_workflow":
                        span.set_status(Status(StatusCode.ERROR, str(command.get("message") or "workflow failed")))
                if context.observability_supported and any(_needs_carrier(c) for c in commands):
                    carrier = inject_current()
                    if carrier is not None:
                        outcome = dataclasses.replace(outcome, commands=[
                            {**c, FIELD: carrier} if _needs_carrier(c) else c for c in commands])
                return outcome

    # -- activities ---------------------------------------------------------------------------
    def execute_activity(self, context: ActivityInterceptorContext, next: ActivityHandler) -> Any:
        task = context.task
        parent, links = self._parent(task, context.observability_supported, context.namespace)
        attributes = _attrs(workflow_instance_id=task.get("workflow_id"), workflow_run_id=task.get("run_id"),
                            workflow_type=task.get("workflow_type"), activity_type=context.activity_type,
                            activity_id=task.get("activity_execution_id"),
                            activity_attempt_id=task.get("activity_attempt_id") or task.get("attempt_id"),
                            activity_attempt_number=task.get("attempt_number"), task_queue=context.task_queue,
                            namespace=context.namespace, worker_id=context.worker_id, task_id=task.get("task_id"))
        span = self.tracer.start_span(f"RunActivity:{context.activity_type}", context=parent, links=links,
                                      kind=SpanKind.SERVER, attributes=attributes)
        with trace.use_span(span, end_on_exit=True, record_exception=True, set_status_on_exception=True):
            return next(context)

    # -- queries ------------------------------------------------------------------------------
    def execute_query_task(self, context: QueryTaskInterceptorContext, next: QueryTaskHandler) -> Any:
        task = context.task
        parent, links = self._parent(task, context.observability_supported, context.namespace)
        name = str(task.get("query_name") or "")
        attributes = _attrs(workflow_instance_id=task.get("workflow_id"), workflow_run_id=task.get("run_id"),
                            workflow_type=task.get("workflow_type"), task_queue=context.task_queue,
                            namespace=context.namespace, worker_id=context.worker_id,
                            task_id=task.get("query_task_id"), **{"durable.message_name": name})
        span = self.tracer.start_span(f"HandleQuery:{name}", context=parent, links=links, kind=SpanKind.SERVER,
                                      attributes=attributes)
        with trace.use_span(span, end_on_exit=True):
            outcome = next(context)
            failure = getattr(outcome, "failure", None)
            if failure:
                span.set_status(Status(StatusCode.ERROR, str(failure.get("message") or "query failed")))
            return outcome

    # -- nestjs-durable steps -----------------------------------------------------------------
    def execute_step(self, task: Mapping[str, Any], next: Any) -> Dict[str, Any]:
        """A ``RunStep:<name>`` span continuing the engine's ``traceparent`` (and ``tracestate``)."""
        headers = {key: task[key] for key in ("traceparent", "tracestate") if isinstance(task.get(key), str)}
        parent = _extract(headers) if "traceparent" in headers else otel_context.Context()
        name = str(task.get("name") or "")
        attributes = _attrs(workflow_run_id=task.get("runId"), step_name=name, step_seq=task.get("seq"),
                            step_attempt_number=task.get("attempt"), step_group=task.get("group"))
        span = self.tracer.start_span(f"RunStep:{name}", context=parent, kind=SpanKind.CONSUMER,
                                      attributes=attributes)
        with trace.use_span(span, end_on_exit=True, record_exception=True, set_status_on_exception=True):
            result: Dict[str, Any] = next(task)
            if result.get("status") != "completed":
                error = result.get("error")
                message = error.get("message") if isinstance(error, Mapping) else None
                span.set_status(Status(StatusCode.ERROR, str(message or "step failed")))
            return result


def _first_task_of_run(task: Mapping[str, Any]) -> bool:
    attempt = task.get("workflow_task_attempt", 1)
    return task.get("resume_source_kind") == "workflow_start" and attempt == 1


def _needs_carrier(command: Any) -> bool:
    return isinstance(command, Mapping) and command.get("type") in _NEW_RUN_COMMANDS and FIELD not in command
