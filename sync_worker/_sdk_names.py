"""The published SDK's top-level names that ``sync_worker`` provides with the same meaning.

``from durable_workflow import RetryPolicy, ActivityInfo, ScheduleSpec`` survives the import swap
to ``from sync_worker import ...``: each name here is loaded on first use from the module that
defines it (importing ``sync_worker`` stays light). The SDK's names we do not provide are listed,
with the reason, in docs/interop.md ("SDK names we do not provide"); a test compares
``dir(durable_workflow)`` with both.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

_BY_MODULE: Dict[str, Tuple[str, ...]] = {
    "sync_worker.activity": ("ActivityContext", "ActivityInfo", "ActivityRetryInfo"),
    "sync_worker.interceptors": (
        "ActivityHandler", "QueryTaskHandler", "QueryTaskInterceptorContext", "WorkflowTaskHandler",
        "WorkflowTaskInterceptorContext"),
    "sync_worker.workflow": (
        "ActivityRetryPolicy", "CancellationPolicy", "ChildWorkflowRetryPolicy", "ContinueAsNew", "MessageStream",
        "MessageStreamMessage", "ParentClosePolicy", "Replayer", "Saga", "StartChildWorkflow", "replay",
        "SelectionResult", "DurableOperationHandle", "WorkflowStreamAppendItem", "WorkflowStreamAppendResult",
        "WorkflowStreamDescription", "WorkflowStreamItem", "WorkflowStreamPage"),
    "sync_worker.client": (
        "BridgeAdapterOutcome", "NamespaceDescription", "NamespaceList", "ScheduleAction", "ScheduleBackfillResult",
        "ScheduleDescription", "ScheduleHandle", "ScheduleHistoryEvent", "ScheduleHistoryPage", "ScheduleList",
        "ScheduleSpec", "ScheduleTriggerResult", "SearchAttributeList", "StandaloneActivityExecution",
        "StandaloneActivityHandle", "StandaloneActivityList", "StoragePayloadTestResult", "StorageTestResult",
        "TaskQueueAdmission", "TaskQueueBuildIdCohort", "TaskQueueBuildIdRollout", "TaskQueueBuildIdRolloutState",
        "TaskQueueDescription", "TaskQueueList", "TaskQueueQueryAdmission", "TaskQueueTaskAdmission",
        "TransportRetryPolicy", "WorkflowCommandResult", "WorkflowList", "WorkflowRun", "WorkflowRunList"),
    "sync_worker.errors": (
        "DuplicateRegistrationError", "InvalidArgument", "InvalidWorkflowDefinition", "NamespaceNotFound",
        "QueryTaskAuthorityLost", "RuntimeCapabilityUnsupported", "RuntimeDiscoveryUnavailable",
        "SagaCompensationFailed", "ScheduleAlreadyExists", "ScheduleListError", "ScheduleNotFound", "UpdateFailed",
        "UpdateRejected", "WorkflowEntryArgumentsMismatchError", "WorkflowPayloadDecodeError",
        "UpdateValidationFailed", "DurableOperationCancelled", "ExternalPayloadError", "ExternalPayloadExpired",
        "ExternalPayloadIntegrityError", "ExternalPayloadIntegrityMismatch", "ExternalPayloadNotFound",
        "ExternalPayloadOversized", "ExternalPayloadUnauthorized", "ExternalPayloadUnavailable",
        "ExternalPayloadUnsupported"),
    "sync_worker.worker": ("MetricsRecorder", "NoopMetrics"),
    "sync_worker.external_storage": (
        "AzureBlobExternalStorage", "EXTERNAL_PAYLOAD_REFERENCE_SCHEMA", "ExternalPayloadCache",
        "ExternalPayloadReference", "ExternalPayloadStoragePolicy", "ExternalStorageDriver", "GCSExternalStorage",
        "LocalFilesystemExternalStorage", "S3ExternalStorage", "delete_external_payload",
        "external_storage_driver_from_policy", "external_storage_envelope", "fetch_external_payload",
        "store_external_payload", "RuntimeExternalPayloadReference", "RUNTIME_EXTERNAL_PAYLOAD_REFERENCE_SCHEMA"),
    "sync_worker.worker.prometheus": ("PrometheusMetrics",),
    "sync_worker.worker_session": ("WorkerSession", "WorkerSessionOptions"),
}

#: name -> (module, attribute or None for the module itself)
SDK_NAMES: Dict[str, Tuple[str, Optional[str]]] = {
    name: (module, name) for module, names in _BY_MODULE.items() for name in names
}
# the SDK's alias: its RetryPolicy *is* TransportRetryPolicy (HTTP transport retries)
SDK_NAMES["RetryPolicy"] = ("sync_worker.client", "TransportRetryPolicy")
# the SDK's submodules reachable as attributes, where ours has the same role
SDK_NAMES.update({
    "client": ("sync_worker.client", None),
    "external_storage": ("sync_worker.external_storage", None),
    "interceptors": ("sync_worker.interceptors", None),
    "testing": ("sync_worker.testing", None),
    "worker": ("sync_worker.worker", None),
    "worker_session": ("sync_worker.worker_session", None),
})
