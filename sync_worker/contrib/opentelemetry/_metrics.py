"""The worker's metrics through an OpenTelemetry meter, under the names the Prometheus exporter uses."""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional

from opentelemetry import metrics

from ...runtime.metrics import MetricsRecorder, Tags

__all__ = ["OpenTelemetryMetrics"]

_METER_NAME = "sync_worker.contrib.opentelemetry"


class OpenTelemetryMetrics:
    """A :class:`~sync_worker.runtime.metrics.MetricsRecorder` that records through OpenTelemetry.

    ``Worker(..., metrics=OpenTelemetryMetrics())`` (or ``WorkerOptions(metrics=...)``): every
    counter, histogram and gauge the runtime records becomes the OpenTelemetry instrument of the
    same name (``durable_workflow_worker_tasks``, ``durable_workflow_worker_task_duration_seconds``,
    ...) with the same tags as attributes, exported by whatever reader the meter provider has (OTLP,
    Prometheus, console). ``also`` forwards every call to another recorder too (e.g. the
    Prometheus one), so both exporters see the same numbers.
    """

    def __init__(self, meter_provider: Optional[metrics.MeterProvider] = None, *,
                 also: Optional[MetricsRecorder] = None) -> None:
        from ... import __version__

        self.meter = metrics.get_meter(_METER_NAME, __version__, meter_provider)
        self.also = also
        self._lock = threading.Lock()
        self._counters: Dict[str, Any] = {}
        self._histograms: Dict[str, Any] = {}
        self._gauges: Dict[str, Any] = {}

    def _instrument(self, table: Dict[str, Any], name: str, make: Any) -> Any:
        found = table.get(name)
        if found is None:
            with self._lock:
                found = table.get(name)
                if found is None:
                    unit = "s" if name.endswith("_seconds") else ("By" if name.endswith("_bytes") else "1")
                    found = table[name] = make(name, unit=unit)
        return found

    def increment(self, name: str, value: float = 1.0, tags: Optional[Tags] = None) -> None:
        self._instrument(self._counters, name, self.meter.create_counter).add(value, dict(tags or {}))
        if self.also is not None:
            self.also.increment(name, value, tags)

    def record(self, name: str, value: float, tags: Optional[Tags] = None) -> None:
        self._instrument(self._histograms, name, self.meter.create_histogram).record(value, dict(tags or {}))
        if self.also is not None:
            self.also.record(name, value, tags)

    def gauge(self, name: str, value: float, tags: Optional[Tags] = None) -> None:
        self._instrument(self._gauges, name, self.meter.create_gauge).set(value, dict(tags or {}))
        gauge = getattr(self.also, "gauge", None)
        if gauge is not None:
            gauge(name, value, tags)
