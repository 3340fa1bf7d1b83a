"""The exit codes of every worker command, in one place.

``sync-worker run``, ``sync-worker celery ... worker``, ``sync-worker nestjs`` and
``manage.py durable_worker`` all end through :func:`sync_worker.host.serve`, so a process
manager reads the same code from each:

==  ==========================================================================================
0   clean shutdown (every runtime drained and deregistered)
1   a runtime failed (registration refused, a poller died, deregistration failed)
2   usage or configuration error (nothing was started)
3   warm shutdown incomplete: work was still running at the deadline (registration kept)
4   cold stop (a second SIGTERM/SIGINT, or SIGQUIT): running work abandoned
==  ==========================================================================================

The operator commands (``sync-worker workflow ...``) keep the Durable Workflow CLI's own codes
(``sync_worker.cli._common``); they run no worker.
"""

from __future__ import annotations

from typing import Optional

__all__ = ["EXIT_COLD_STOP", "EXIT_FAILED", "EXIT_INCOMPLETE", "EXIT_OK", "EXIT_USAGE", "exit_code"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3
EXIT_COLD_STOP = 4


def exit_code(error: Optional[BaseException], *, cold: bool) -> int:
    """The exit code of a run that ended with ``error`` (None: cleanly), ``cold`` when a cold stop was sent."""
    from ..worker import ShutdownIncomplete

    if cold:
        return EXIT_COLD_STOP
    if error is None:
        return EXIT_OK
    if isinstance(error, ShutdownIncomplete):
        return EXIT_INCOMPLETE
    return EXIT_FAILED
