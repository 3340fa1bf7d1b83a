"""OpenTelemetry for sync_worker: traces across client, workflow and activity; metrics.

Turn it on the OpenTelemetry way, once per process, after configuring a tracer provider::

    from sync_worker.contrib.opentelemetry import SyncWorkerInstrumentor
    SyncWorkerInstrumentor().instrument()          # every Client, Worker and nestjs step

or wire it explicitly: ``Worker(..., interceptors=[TracingInterceptor()])`` (and
``sync_worker.instrumentation.install_client_hook(interceptor.client_call)`` for the client).
Do one or the other, not both: both would record every span twice.

What it records (docs/observability.md has the picture):

* a ``CLIENT`` span per client call on a workflow (``StartWorkflow:<type>``,
  ``SignalWorkflow:<name>``, ``UpdateWorkflow:<name>``, ``QueryWorkflow:<name>``,
  ``CancelWorkflow``, ``TerminateWorkflow``), child of the caller's current span (a Django view's);
  when the server keeps trace context, its W3C ``traceparent`` travels with the start, signal,
  update and cancel (the published SDK's ``observability_context``);
* ``RunWorkflow:<type>`` once per run (on the first attempt of its first task) and
  ``WorkflowTask:<type>`` per workflow task, children of the start's span. Replay happens
  inside a task and records nothing, so a cold replay, a sticky resume or another worker adds
  exactly one span per task the server handed out. A signal's or update's caller is a link;
  ``start_child_workflow`` / ``continue_as_new`` commands carry the task's span to the new run;
* ``RunActivity:<type>`` per activity attempt, child of the run's trace; ``HandleQuery:<name>``
  per query task; ``RunStep:<name>`` per nestjs-durable step, continuing the engine's ``traceparent``.

Where the server keeps no trace context, ``instrument(trace_runs=True)`` (``TracingInterceptor(
trace_runs=True)``) still puts a run's spans in one trace, derived from its run id.

Attributes use the published SDK's names (``workflow_instance_id``, ``workflow_run_id``,
``task_queue``, ``workflow_type``, ``activity_type``, ``activity_attempt_number``, ...).
Do not start spans in workflow code: it replays. Spans in activity code nest under
``RunActivity``.
"""

from __future__ import annotations

from ._instrumentor import SyncWorkerInstrumentor
from ._metrics import OpenTelemetryMetrics
from ._tracing import TracingInterceptor, run_span_context

__all__ = ["OpenTelemetryMetrics", "SyncWorkerInstrumentor", "TracingInterceptor", "run_span_context"]
