"""Shared pytest configuration.

Fixtures for the embedded dev server live in ``tests/_devserver.py`` and are re-exported
here so every test folder can use them.

The published SDK (``durable-workflow`` 2.12, the interop peer) needs Python 3.10+. Where it is
not installed, the modules that import it at load time are not collected, and the report header
says so and why; every other test runs.
"""

from __future__ import annotations

import importlib.util
from typing import List

from tests._devserver import *  # noqa: F403
from tests._no_skips import (  # noqa: F401  (pytest hooks)
    pytest_collectreport,
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_terminal_summary,
)
from tests._sdk_missing import SDK_MISSING

#: Test modules that import the published SDK when they load (paths relative to tests/).
SDK_MODULES = [
    "conformance/test_server_parity_sdk.py",
    "interop/test_authoring_local.py",
    "interop/test_authoring_scopes.py",
    "interop/test_authoring_select.py",
    "interop/test_authoring_streams.py",
    "interop/test_authoring_validators.py",
    "interop/test_devserver_restart.py",
    "interop/test_import_swap.py",
    "interop/test_mixed_workers.py",
    "interop/test_otel_sdk_trace.py",
    "interop/test_payload_sdk_roundtrip.py",
    "interop/test_sdk_control_plane.py",
    "interop/test_sdk_end_to_end.py",
    "interop/test_sdk_namespace_isolation.py",
    "interop/test_sdk_names.py",
    "interop/test_sdk_sessions.py",
    "interop/test_sdk_runtime_reference.py",
    "interop/test_sdk_external_storage.py",
    "unit/observability/test_trace_context_wire.py",
    "interop/test_sync_client_swap.py",
]
SDK_INSTALLED = importlib.util.find_spec("durable_workflow") is not None

collect_ignore: List[str] = [] if SDK_INSTALLED else list(SDK_MODULES)


def pytest_report_header() -> List[str]:
    if SDK_INSTALLED:
        return []
    return [f"not collected, because {SDK_MISSING}: " + ", ".join(SDK_MODULES)]
