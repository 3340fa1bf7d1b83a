"""Integrations with third-party observability tools, each behind its own extra.

* :mod:`sync_worker.contrib.opentelemetry` (``pip install "sync-worker[otel]"``): traces across
  client, workflow and activity, and the worker's metrics through an OpenTelemetry meter;
* :mod:`sync_worker.contrib.sentry` (``pip install "sync-worker[sentry]"``): task failures as
  Sentry events with the task's tags.

Nothing in ``sync_worker`` imports these modules; importing one needs its extra.
"""
