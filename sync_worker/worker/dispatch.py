"""Task dispatch of the Durable Workflow source: a polled task is parsed once (a malformed one is
refused there), then runs on the runtime shell holding its slot; outcomes are counted.

:class:`TaskDispatcher` holds its own collaborators (the shell, the worker plane, the registries,
the interceptors, the sticky cache); the pollers hand it the wire objects they received.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from .. import instrumentation
from ..cancel import CancelToken
from ..interceptors import WorkerInterceptor
from ..protocol import (
    ActivityTask,
    MalformedTask,
    QueryTask,
    UpdateValidationTask,
    WorkerPlane,
    WorkflowTask,
    parse_task,
)
from ..protocol.trace_context import advertised
from ..runtime import log_context
from ..runtime.inflight import InflightTask
from ..runtime.metrics import TASK_DURATION, TASKS
from ..runtime.shell import RuntimeShell
from ..runtime.slots import Slot
from .activities import run_activity_task
from .malformed import report_malformed
from .sticky import StickyWorkflowCache
from .update_validation import run_update_validation_task
from .workflow_support import WorkflowSet
from .workflow_tasks import run_query_task, run_workflow_task

__all__ = ["TaskDispatcher"]

logger = logging.getLogger("sync_worker.worker")


class TaskDispatcher:
    """Runs the tasks the pollers receive. ``workflow_executor`` / ``query_executor`` replace the
    replay entry points (tests, custom front ends); ``None`` is the package's own."""

    def __init__(
        self,
        *,
        shell: RuntimeShell,
        client: WorkerPlane,
        worker_id: str,
        task_queue: str,
        namespace: Optional[str],
        activities: Mapping[str, Callable[..., Any]],
        workflows: WorkflowSet,
        interceptors: Sequence[WorkerInterceptor],
        sticky: StickyWorkflowCache,
        build_id: Optional[str],
        poll_cancel: CancelToken,
    ) -> None:
        self.shell, self.client = shell, client
        self.worker_id, self.task_queue, self.namespace = worker_id, task_queue, namespace
        self.activities, self.workflows = activities, workflows
        self.interceptors, self.sticky, self.build_id = interceptors, sticky, build_id
        self.poll_cancel = poll_cancel
        #: the cloned worker plane query tasks are answered on (set when query polling starts)
        self.query_client: Optional[WorkerPlane] = None
        self.workflow_executor: Optional[Callable[..., Any]] = None
        self.query_executor: Optional[Callable[..., Any]] = None
        #: the worker's session book: a leased task's ``worker_session`` is tracked (docs/sessions.md)
        self.sessions: Optional[Any] = None

    def _interceptors(self) -> Sequence[WorkerInterceptor]:
        """The process's installed instrumentation (outermost), then this worker's own interceptors."""
        installed = instrumentation.worker_interceptors()
        return tuple(installed) + tuple(self.interceptors) if installed else self.interceptors

    def _observability(self) -> bool:
        """Whether the server hands back trace-context carriers (cluster info, cached at registration)."""
        capabilities = getattr(self.client, "server_capabilities", None)
        try:
            return bool(callable(capabilities) and advertised(capabilities()))
        except Exception:
            return False

    def _log_fields(self, kind: str, raw: Mapping[str, Any]) -> Any:
        """The ``with`` block binding a task's ids for its log lines (worked out at the first line)."""
        return log_context.bound_task(kind, raw, task_queue=self.task_queue, namespace=self.namespace)

    def _tags(self, kind: str, outcome: str) -> Dict[str, str]:
        return {"task_kind": kind, "task_queue": self.task_queue, "outcome": outcome}

    def _parse(self, kind: str, raw: Dict[str, Any], slot: Optional[Slot]) -> Any:
        """The typed task, or None after refusing a malformed one (counted, logged, reported)."""
        try:
            return parse_task(kind, raw)
        except MalformedTask as error:
            client = self.query_client if kind == "query" and self.query_client is not None else self.client
            report_malformed(error, client=client, worker_id=self.worker_id, cancel=self.poll_cancel)
            self.shell.metrics.increment(TASKS, 1.0, self._tags(kind, "malformed"))
            if slot is not None:
                slot.release()
            return None

    def activity(self, raw: Dict[str, Any], slot: Optional[Slot], here: bool = False) -> Optional[InflightTask]:
        """Run a polled activity task in ``slot``; ``here``: return it to run on the caller's unit."""
        assert slot is not None
        task = self._parse("activity", raw, slot)
        if not isinstance(task, ActivityTask):
            return None
        slot.started(task.activity_type)
        if self.sessions is not None:
            self.sessions.track(raw)

        def body(inflight: Any) -> str:
            with log_context.bound_task("activity", raw, task_queue=self.task_queue, namespace=self.namespace):
                return run_activity_task(
                    client=self.client, task=task, activities=self.activities, worker_id=self.worker_id,
                    task_queue=self.task_queue, inflight=inflight, interceptors=self._interceptors(),
                    namespace=self.namespace, observability_supported=self._observability)

        return self.shell.spawn_task("activity", task.task_id, slot, body, here=here)

    def workflow(self, raw: Dict[str, Any], slot: Optional[Slot], here: bool = False) -> Optional[InflightTask]:
        """Run a polled workflow task (or update validation) in ``slot``; ``here`` as for :meth:`activity`."""
        assert slot is not None
        task = self._parse("workflow", raw, slot)
        if isinstance(task, UpdateValidationTask):
            validation = task
            return self.shell.spawn_task(
                "update_validation", task.id, slot, lambda inflight: run_update_validation_task(
                    client=self.client, task=validation, registry=self.workflows.registry(), worker_id=self.worker_id,
                    cancel=inflight.cancel), here=here)
        if not isinstance(task, WorkflowTask):
            return None

        def body(inflight: Any) -> str:
            with self._log_fields("workflow", raw):
                return run_workflow_task(
                    client=self.client, task=task, registry=self.workflows.registry(), worker_id=self.worker_id,
                    task_queue=self.task_queue, inflight=inflight, sleep=self.shell.backend.sleep,
                    executor=self.workflow_executor, interceptors=self._interceptors(), namespace=self.namespace,
                    sticky=self.sticky, build_id=self.build_id, activities=self.activities,
                    observability_supported=self._observability)

        return self.shell.spawn_task("workflow", task.task_id, slot, body, here=here)

    def query(self, raw: Dict[str, Any], slot: Optional[Slot], here: bool = False) -> None:
        """Answer a query task on the poller itself (no slot: ``here`` changes nothing)."""
        task = self._parse("query", raw, None)
        if not isinstance(task, QueryTask):
            return
        client = self.query_client if self.query_client is not None else self.client
        started = self.shell.backend.monotonic()
        with self._log_fields("query", raw):
            outcome = run_query_task(client=client, task=task, registry=self.workflows.registry(),
                                     worker_id=self.worker_id, cancel=self.poll_cancel, executor=self.query_executor,
                                     interceptors=self._interceptors(), task_queue=self.task_queue,
                                     namespace=self.namespace, observability_supported=self._observability())
        tags = self._tags("query", outcome)
        self.shell.metrics.increment(TASKS, 1.0, tags)
        self.shell.metrics.record(TASK_DURATION, self.shell.backend.monotonic() - started, tags)
