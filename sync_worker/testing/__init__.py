"""Testing workflows: the SDK's harness, time-skipping and local environments, replay checks.

* :class:`WorkflowEnvironment` — ``durable_workflow.testing``'s in-process harness (mocked
  activities and children, auto-fired timers, continue-as-new chains): a test written for the
  SDK runs after swapping its imports to ``sync_worker``.
* ``WorkflowEnvironment.start_time_skipping()`` / ``start_local()`` —
  :class:`LiveEnvironment`: an in-process dev server (on a virtual clock that jumps to the next
  timer, timeout or schedule while nothing is in flight), a :class:`~sync_worker.Client` and
  real workers on threads or gevent.
* :func:`replay_history`, :func:`replay_history_file` and :class:`Replayer` — replay recorded
  histories against the current code, for CI (``sync-worker replay`` on the command line).
* The pytest plugin (``durable_env``, ``durable_client``): :mod:`sync_worker.testing.pytest_plugin`.

Importing this package is light; each name loads its module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "WorkflowEnvironment": "sync_worker.testing.harness",
    "WorkflowRunRecord": "sync_worker.testing.harness",
    "MockCallRecord": "sync_worker.testing.mocks",
    "LiveEnvironment": "sync_worker.testing.live",
    "replay_history": "sync_worker.testing.replay",
    "replay_history_file": "sync_worker.testing.replay",
    "load_history_file": "sync_worker.testing.replay",
    "load_history_files": "sync_worker.testing.replay",
    "fetch_histories": "sync_worker.testing.replay",
    "Replayer": "sync_worker.workflow.replay_check",
    "ReplayReport": "sync_worker.workflow.replay_check",
    "HistoryCheck": "sync_worker.workflow.replay_check",
}

if TYPE_CHECKING:  # pragma: no cover
    from ..workflow.replay_check import HistoryCheck, Replayer, ReplayReport
    from .harness import WorkflowEnvironment, WorkflowRunRecord
    from .live import LiveEnvironment
    from .mocks import MockCallRecord
    from .replay import fetch_histories, load_history_file, load_history_files, replay_history, replay_history_file


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sync_worker.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "HistoryCheck",
    "LiveEnvironment",
    "MockCallRecord",
    "ReplayReport",
    "Replayer",
    "WorkflowEnvironment",
    "WorkflowRunRecord",
    "fetch_histories",
    "load_history_file",
    "load_history_files",
    "replay_history",
    "replay_history_file",
]
