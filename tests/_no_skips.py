"""CI's rule: a skipped test is a failure unless the test does not apply to this Python or platform.

Locally a test whose service or peer is missing (PostgreSQL not started, Redis absent, the nestjs
peer not installed) skips and says how to get it. CI installs every one of them (``.ci/run`` runs
``scripts/prepare``), so there a skip can only mean that something broke: with
``SYNC_WORKER_NO_SKIPS=1`` (``.ci/run`` sets it) such a skip fails the run, listed with its reason.
The skips that stay allowed are the ones that say the test cannot apply here: the published SDK
and the django-tasks backport need Python 3.10+, the prefork pool and POSIX signals need POSIX,
Debian's uWSGI plugin embeds its own Python minor version.
"""

from __future__ import annotations

import os
import sys
from typing import Any, List, Tuple

from tests._sdk_missing import DJANGO_TASKS_MISSING, SDK_MISSING

ENV = "SYNC_WORKER_NO_SKIPS"

#: Reasons (substrings) that say a test does not apply to this platform or interpreter build.
DOES_NOT_APPLY = (
    "POSIX",
    "reads Linux's /proc",
    "embeds another Python minor version",
)

#: Reasons that only hold below Python 3.10 (a dependency that installs on 3.10+ only): on 3.10+
#: the same skip means the dependency did not install, and fails.
BELOW_3_10 = (SDK_MISSING, DJANGO_TASKS_MISSING, "3.10+")

_refused: List[Tuple[str, str]] = []


def _strict() -> bool:
    return os.environ.get(ENV, "") not in ("", "0")


def _reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _note(report: Any) -> None:
    if not _strict() or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _reason(report)
    allowed = DOES_NOT_APPLY + (BELOW_3_10 if sys.version_info < (3, 10) else ())
    if not any(marker in reason for marker in allowed):
        _refused.append((report.nodeid or "(collection)", reason))


def pytest_runtest_logreport(report: Any) -> None:
    _note(report)


def pytest_collectreport(report: Any) -> None:
    _note(report)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if _refused and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _refused:
        return
    terminalreporter.section(f"skips refused ({ENV}=1: CI installs every service and peer)", red=True)
    for nodeid, reason in _refused:
        terminalreporter.line(f"{nodeid}: {reason}")
