"""The pytest plugin loads in every pytest process where sync_worker is installed: it must stay light.

Loading it imports sync_worker's light package modules only (no client, server, worker, socket
libraries or asyncio), so a gevent suite can still patch first and other projects' test runs
do not pay for it; the environment is imported when a test asks for a fixture.
"""

from __future__ import annotations

import subprocess
import sys

# stdlib base64 (the external-payload errors read digests) is light; Python 3.9 has not loaded it before
ALLOWED = {"base64", "sync_worker", "sync_worker._sdk_names", "sync_worker.errors", "sync_worker.errors.outcomes",
           "sync_worker.errors.external_payloads", "sync_worker.payloads", "sync_worker.testing",
           "sync_worker.testing.pytest_plugin"}


def test_loading_the_plugin_imports_only_light_modules() -> None:
    code = ("import sys, pytest\n"
            "before = set(sys.modules)\n"
            "import sync_worker.testing.pytest_plugin\n"
            "print(' '.join(sorted(set(sys.modules) - before)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert set(out) <= ALLOWED, sorted(set(out) - ALLOWED)


def test_the_plugin_is_registered_by_the_entry_point() -> None:
    from importlib.metadata import entry_points

    group = entry_points(group="pytest11") if sys.version_info >= (3, 10) else entry_points().get("pytest11", ())
    found = {ep.value for ep in group if ep.name == "sync_worker"}  # an editable install may list it twice
    assert found == {"sync_worker.testing.pytest_plugin"}
