"""``PrometheusMetrics``: the worker's metrics as Prometheus counters and histograms.

Install the extra (``pip install "sync-worker[prometheus]"``) and pass
``Worker(..., metrics=PrometheusMetrics())``; expose the registry the usual way
(``prometheus_client.start_http_server`` or your web app's ``/metrics`` view). Metric names
are the published SDK's (``durable_workflow_worker_polls_total``,
``durable_workflow_worker_task_duration_seconds``, ...), so existing dashboards keep working.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Mapping, Optional, Tuple

from ..runtime.metrics import (
    ADMISSION_DEFERRALS,
    ADMISSION_DEFERRING,
    ADMISSION_WAITING,
    CLIENT_REQUESTS,
    CONCURRENCY_IN_FLIGHT,
    CONCURRENCY_LIMIT,
    MEMORY_LIMIT,
    MEMORY_USAGE,
    POLL_DURATION,
    POLLS,
    TASK_DURATION,
    TASKS,
)

__all__ = ["PrometheusMetrics"]

_DOCS = {
    POLLS: "Worker long polls by task kind, task queue and outcome (task, empty, error, backpressure).",
    POLL_DURATION: "Duration of worker long polls in seconds.",
    TASKS: "Worker tasks by task kind, task queue and outcome.",
    TASK_DURATION: "Duration of worker task execution in seconds.",
    CLIENT_REQUESTS: "Client requests by route, plane and outcome.",
    CONCURRENCY_LIMIT: "Live concurrency limit of the worker's activity slots (fixed N or adaptive).",
    CONCURRENCY_IN_FLIGHT: "Activity tasks running now.",
    MEMORY_USAGE: "Memory usage the admission gate reads (working set, never a peak), in bytes.",
    MEMORY_LIMIT: "Memory ceiling the admission gate compares usage with (cgroup limit or RAM), in bytes.",
    ADMISSION_WAITING: "Pollers waiting at the memory admission gate.",
    ADMISSION_DEFERRING: "1 while the memory admission gate defers new activity tasks, else 0.",
    ADMISSION_DEFERRALS: "Times the memory admission gate made a poller wait for headroom.",
}
# Fixed label sets: Prometheus needs them up front, and the runtime always sends these tags.
_LABELS = {
    POLLS: ("task_kind", "task_queue", "outcome"),
    POLL_DURATION: ("task_kind", "task_queue", "outcome"),
    TASKS: ("task_kind", "task_queue", "outcome"),
    TASK_DURATION: ("task_kind", "task_queue", "outcome"),
    CONCURRENCY_LIMIT: ("task_kind", "task_queue"),
    CONCURRENCY_IN_FLIGHT: ("task_kind", "task_queue"),
    MEMORY_USAGE: ("task_kind", "task_queue"),
    MEMORY_LIMIT: ("task_kind", "task_queue"),
    ADMISSION_WAITING: ("task_kind", "task_queue"),
    ADMISSION_DEFERRING: ("task_kind", "task_queue"),
    ADMISSION_DEFERRALS: ("task_kind", "task_queue"),
}


class PrometheusMetrics:
    """A :class:`~sync_worker.runtime.metrics.MetricsRecorder` backed by ``prometheus_client``.

    ``registry`` defaults to the global ``prometheus_client.REGISTRY``. Metrics are created on
    first use; a metric not known here takes the label names of its first observation, and
    later observations fill missing labels with ``""`` (extra tags are dropped).
    """

    def __init__(self, registry: Any = None) -> None:
        try:
            import prometheus_client
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise ImportError(
                "PrometheusMetrics needs prometheus-client: pip install 'sync-worker[prometheus]'"
            ) from exc
        self._client = prometheus_client
        self._registry = registry if registry is not None else prometheus_client.REGISTRY
        self._lock = threading.Lock()
        self._metrics: Dict[Tuple[str, str], Tuple[Any, Tuple[str, ...]]] = {}

    def increment(self, name: str, value: float = 1.0, tags: Optional[Mapping[str, str]] = None) -> None:
        metric, labels = self._metric("counter", name, tags)
        self._labelled(metric, labels, tags).inc(value)

    def record(self, name: str, value: float, tags: Optional[Mapping[str, str]] = None) -> None:
        metric, labels = self._metric("histogram", name, tags)
        self._labelled(metric, labels, tags).observe(value)

    def gauge(self, name: str, value: float, tags: Optional[Mapping[str, str]] = None) -> None:
        metric, labels = self._metric("gauge", name, tags)
        self._labelled(metric, labels, tags).set(value)

    def _metric(self, kind: str, name: str, tags: Optional[Mapping[str, str]]) -> Tuple[Any, Tuple[str, ...]]:
        key = (kind, name)
        with self._lock:
            found = self._metrics.get(key)
            if found is None:
                labels = _LABELS.get(name) or tuple(sorted(tags or {}))
                factory = {"counter": self._client.Counter, "gauge": self._client.Gauge}.get(
                    kind, self._client.Histogram)
                documentation = _DOCS.get(name, name.replace("_", " "))
                found = (factory(name, documentation, labels, registry=self._registry), labels)
                self._metrics[key] = found
            return found

    @staticmethod
    def _labelled(metric: Any, labels: Tuple[str, ...], tags: Optional[Mapping[str, str]]) -> Any:
        if not labels:
            return metric
        values = tags or {}
        return metric.labels(*(str(values.get(label, "")) for label in labels))
