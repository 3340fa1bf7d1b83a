"""Running several workers in one process with the signal semantics of ``sync-worker run``.

:class:`WorkerGroup` is :class:`sync_worker.host.WorkerGroup` (re-exported here, where it
used to be written): it gives the workers of every configured task queue the ``run()`` /
``stop(cold=...)`` surface of one worker, so the management command hands it to the very same
:func:`sync_worker.host.serve` as ``sync-worker run``: first SIGTERM/SIGINT warm, second cold,
SIGQUIT cold; exit 0 clean, 1 failed, 3 warm shutdown incomplete, 4 cold stop.

:func:`reexec_patched_for_gevent` is the ``-P gevent`` launcher: Django and the project's
modules are already imported when a management command runs, too late for monkey-patching,
so the command replaces the process with a fresh interpreter that patches first and then
runs the same ``manage.py`` command line (as django_dramatiq execs ``dramatiq-gevent``).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Sequence

from sync_worker.host import WorkerGroup

__all__ = ["REEXEC_ENV", "WorkerGroup", "gevent_patched", "reexec_patched_for_gevent"]

logger = logging.getLogger("sync_worker.django.runner")

#: Set in the re-executed process, so it never re-executes again.
REEXEC_ENV = "SYNC_WORKER_DJANGO_GEVENT_REEXEC"


def gevent_patched() -> bool:
    """True when this process was monkey-patched for gevent (socket and threading at least)."""
    if "gevent" not in sys.modules:
        return False
    from gevent import monkey

    return bool(monkey.is_module_patched("socket") and monkey.is_module_patched("threading"))


def reexec_patched_for_gevent(argv: Sequence[str]) -> None:
    """Replace this process with one that patches for gevent, then runs ``argv`` (a manage.py command line).

    Never returns. The project directory (where ``manage.py`` lives) is put on the new
    process's ``PYTHONPATH``, and ``DJANGO_SETTINGS_MODULE`` is inherited.
    """
    if os.environ.get(REEXEC_ENV):
        raise RuntimeError("the re-executed gevent process is still not patched; refusing to loop")
    try:
        import gevent  # noqa: F401
    except ImportError:
        raise RuntimeError("-P gevent needs gevent installed: pip install 'sync-worker[gevent]'") from None
    env = dict(os.environ)
    env[REEXEC_ENV] = "1"
    env["SYNC_WORKER_POOL"] = "gevent"
    script = os.path.abspath(argv[0]) if argv and os.path.exists(argv[0]) else None
    path_entries = [os.path.dirname(script)] if script else []
    prefixes = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix})
    path_entries += [p for p in sys.path if p and os.path.isdir(p) and not p.startswith(prefixes)]
    if env.get("PYTHONPATH"):
        path_entries.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path_entries))
    args = [sys.executable, "-m", "sync_worker_django.gevent_main", *argv]
    logger.info("-P gevent: re-executing patched: %s", " ".join(args))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, args, env)
