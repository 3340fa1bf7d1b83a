"""The result dataclasses of :class:`sync_worker.Client`, named and shaped as in ``durable_workflow`` 2.12."""

from __future__ import annotations

from .activities import StandaloneActivityExecution, StandaloneActivityList
from .namespaces import (
    NamespaceDescription,
    NamespaceList,
    SearchAttributeList,
    StoragePayloadTestResult,
    StorageTestResult,
)
from .schedules import (
    ScheduleAction,
    ScheduleBackfillResult,
    ScheduleDescription,
    ScheduleHistoryEvent,
    ScheduleHistoryPage,
    ScheduleList,
    ScheduleSpec,
    ScheduleTriggerResult,
)
from .task_queues import (
    TaskQueueAdmission,
    TaskQueueBuildIdCohort,
    TaskQueueBuildIdRollout,
    TaskQueueBuildIdRolloutState,
    TaskQueueDescription,
    TaskQueueList,
    TaskQueueQueryAdmission,
    TaskQueueTaskAdmission,
)
from .workers import WorkerDescription, WorkerList
from .workflows import (
    TERMINAL_STATUSES,
    WorkflowCommandResult,
    WorkflowExecution,
    WorkflowList,
    WorkflowRun,
    WorkflowRunList,
)

__all__ = [
    "TERMINAL_STATUSES",
    "NamespaceDescription",
    "NamespaceList",
    "ScheduleAction",
    "ScheduleBackfillResult",
    "ScheduleDescription",
    "ScheduleHistoryEvent",
    "ScheduleHistoryPage",
    "ScheduleList",
    "ScheduleSpec",
    "ScheduleTriggerResult",
    "SearchAttributeList",
    "StandaloneActivityExecution",
    "StandaloneActivityList",
    "StoragePayloadTestResult",
    "StorageTestResult",
    "TaskQueueAdmission",
    "TaskQueueBuildIdCohort",
    "TaskQueueBuildIdRollout",
    "TaskQueueBuildIdRolloutState",
    "TaskQueueDescription",
    "TaskQueueList",
    "TaskQueueQueryAdmission",
    "TaskQueueTaskAdmission",
    "WorkerDescription",
    "WorkerList",
    "WorkflowCommandResult",
    "WorkflowExecution",
    "WorkflowList",
    "WorkflowRun",
    "WorkflowRunList",
]
