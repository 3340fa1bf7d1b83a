"""Tests in this folder need a process monkey-patched for gevent first.

``tests/gevent_suite.py`` runs them (it patches before anything else is imported); the main,
unpatched pytest run does not collect them at all, so they are neither run nor skipped there.
"""

from __future__ import annotations

import sys


def _patched_first() -> bool:
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and bool(monkey.is_module_patched("socket")) and bool(
        monkey.is_module_patched("threading")
    )


collect_ignore_glob = [] if _patched_first() else ["test_*.py"]
