"""Running several workers in one process with the signal semantics of ``sync-worker run``.

:class:`WorkerGroup` gives a list of workers the ``run()`` / ``stop(cold=...)`` surface of
one :class:`~sync_worker.Worker`, so the management command hands it to the very same
signal loop and exit codes as ``sync-worker run`` (:func:`sync_worker.worker.cli.serve`):
first SIGTERM/SIGINT warm, second cold, SIGQUIT cold; exit 0 clean, 1 failed, 3 warm
shutdown incomplete, 4 cold stop.

:func:`reexec_patched_for_gevent` is the ``-P gevent`` launcher: Django and the project's
modules are already imported when a management command runs, too late for monkey-patching,
so the command replaces the process with a fresh interpreter that patches first and then
runs the same ``manage.py`` command line (as django_dramatiq execs ``dramatiq-gevent``).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import List, Optional, Sequence

from sync_worker import Worker
from sync_worker.worker.worker import ShutdownIncomplete

__all__ = ["REEXEC_ENV", "WorkerGroup", "gevent_patched", "reexec_patched_for_gevent"]

logger = logging.getLogger("sync_worker.django.runner")

#: Set in the re-executed process, so it never re-executes again.
REEXEC_ENV = "SYNC_WORKER_DJANGO_GEVENT_REEXEC"
_TICK = 0.2


class WorkerGroup:
    """Several workers run and stopped as one (one per task queue)."""

    def __init__(self, workers: Sequence[Worker]) -> None:
        if not workers:
            raise ValueError("a WorkerGroup needs at least one worker")
        self.workers: List[Worker] = list(workers)
        self._errors: List[Optional[BaseException]] = [None] * len(self.workers)
        self._stop_lock = threading.Lock()
        self._stopping = False

    @property
    def pool(self) -> str:
        return self.workers[0].pool

    def run(self) -> None:
        """Run every worker until :meth:`stop` (or one fails, which stops the others)."""
        threads = [threading.Thread(target=self._run_one, args=(index,), name=f"sync-worker-{w.task_queue}",
                                    daemon=True) for index, w in enumerate(self.workers)]
        for thread in threads:
            thread.start()
        while any(t.is_alive() for t in threads):
            for thread in threads:
                thread.join(_TICK / len(threads))
            failed = [e for e in self._errors if e is not None and not isinstance(e, ShutdownIncomplete)]
            if failed and not self._stopping:
                logger.error("a worker failed (%s); stopping the others", type(failed[0]).__name__)
                threading.Thread(target=self._stop_quietly, daemon=True).start()
        self._raise_first()

    def _run_one(self, index: int) -> None:
        try:
            self.workers[index].run()
        except BaseException as error:
            self._errors[index] = error

    def _stop_quietly(self) -> None:
        try:
            self.stop()
        except BaseException:
            pass

    def _raise_first(self) -> None:
        errors = [e for e in self._errors if e is not None]
        hard = [e for e in errors if not isinstance(e, ShutdownIncomplete)]
        if hard:
            raise hard[0]
        if errors:
            running = [name for e in errors for name in getattr(e, "running", [])]
            raise ShutdownIncomplete("; ".join(str(e) for e in errors), running)

    def stop(self, *, cold: bool = False) -> None:
        """Stop every worker at once (warm, or ``cold``); ShutdownIncomplete if any could not drain."""
        with self._stop_lock:
            self._stopping = True
        results: List[Optional[BaseException]] = [None] * len(self.workers)

        def stop_one(index: int) -> None:
            try:
                self.workers[index].stop(cold=cold)
            except BaseException as error:
                results[index] = error

        threads = [threading.Thread(target=stop_one, args=(i,), daemon=True) for i in range(len(self.workers))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        errors = [e for e in results if e is not None]
        if errors:
            hard = [e for e in errors if not isinstance(e, ShutdownIncomplete)]
            if hard:
                raise hard[0]
            running = [name for e in errors for name in getattr(e, "running", [])]
            raise ShutdownIncomplete("; ".join(str(e) for e in errors), running)


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
