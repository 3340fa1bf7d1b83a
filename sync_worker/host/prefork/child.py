"""The child side of the prefork pool: everything that runs after ``os.fork()`` returns 0.

The child never returns into the parent's stack: :func:`child_main` ends with ``os._exit``.
In order, it

* leaves the parent's process group (a terminal's Ctrl-C reaches only the parent, which
  forwards one SIGTERM: the child must not see two signals and stop cold), puts back the default
  SIGCHLD and drops the parent's signal wake-up pipe, closes the parent's descriptors it was
  handed (the health socket, the other children's pipes);
* builds its runtime (``make_runtime(spec, recycler)``: the split of the loaded worker, with its
  own Client, so no socket crosses the fork) and serves it with :func:`sync_worker.host.serve`
  -- the same warm/cold signals and exit codes as a single-process worker;
* reports to the parent twice a second over its pipe (one JSON line: state, readiness,
  liveness, tasks run, a recycling reason), and warm-stops itself when the parent is gone.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional

from ...runtime.backend import POOL_ENV
from ..exits import EXIT_COLD_STOP, EXIT_FAILED, EXIT_OK
from ..protocols import Servable
from ..serve import ServeMessages, serve
from .roles import ChildSpec, Recycler, resident_bytes

__all__ = ["REPORT_SECONDS", "child_main", "runtime_summary"]

logger = logging.getLogger("sync_worker.prefork")

#: The signals that stop a child (blocked by the parent around the fork: see child_main).
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGQUIT})

#: How often a child tells the parent how it is.
REPORT_SECONDS = 0.5

MakeRuntime = Callable[[ChildSpec, Recycler], Servable]


def _members(runtime: Any) -> List[Any]:
    members = getattr(runtime, "runtimes", None)
    return list(members) if members is not None else [runtime]


def runtime_summary(runtime: Any) -> Dict[str, Any]:
    """State, readiness and liveness of a runtime (or a group: ready/live only when every member is)."""
    statuses = runtime.status()
    if not isinstance(statuses, tuple):
        statuses = (statuses,)
    states = sorted({s.state.value for s in statuses})
    return {
        "state": states[0] if len(states) == 1 else "/".join(states),
        "ready": bool(statuses) and all(s.ready for s in statuses),
        "live": bool(statuses) and all(s.live for s in statuses),
        "reason": "; ".join(f"{s.worker_id}: {s.ready_reason}" for s in statuses if not s.ready),
        "worker_ids": [s.worker_id for s in statuses],
        "workers": [{"worker_id": s.worker_id, "task_queue": s.task_queue, "namespace": s.namespace,
                     "state": s.state.value, "ready": s.ready, "ready_reason": s.ready_reason, "live": s.live,
                     "live_reason": s.live_reason, "pid": os.getpid()} for s in statuses],
    }


def _stop_intake(runtime: Any) -> None:
    """Every member takes no new task from now on (the recycle; ``stop`` follows on another thread).
    The shell marks its stop before the source's intake stops, so a poller that ends for that reason
    is never reported as "the activity poller exited" (exit 1 instead of a recycle)."""
    for member in _members(runtime):
        shell = getattr(member, "shell", None)
        if shell is not None:
            shell.stop_intake()


def child_main(spec: ChildSpec, make_runtime: MakeRuntime, *, report_fd: int, parent_pid: int,
               close_fds: Iterable[int], recycler: Recycler) -> None:
    """Run one child until it is stopped or recycled; exits the process (never returns)."""
    code = EXIT_FAILED
    try:
        code = _child(spec, make_runtime, report_fd, parent_pid, close_fds, recycler)
    except BaseException:
        logger.exception("prefork child %s failed", spec.tag)
    finally:
        try:
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _child(spec: ChildSpec, make_runtime: MakeRuntime, report_fd: int, parent_pid: int,
           close_fds: Iterable[int], recycler: Recycler) -> int:
    try:
        os.setpgid(0, 0)
    except OSError:  # pragma: no cover - already a group leader, or not permitted: harmless
        pass
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # Until serve() installs its handlers, a stop signal is only noted (the parent's handlers were
    # copied by the fork and would swallow it). The parent forked with the stop signals blocked, so
    # one sent right after the fork waits, pending, for these handlers.
    early: List[int] = []

    def note(number: int, frame: Any) -> None:
        early.append(number)

    for signum in STOP_SIGNALS:
        signal.signal(signum, note)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    # A child's workers run on threads: a Worker the app builds here without a pool follows this
    # (SYNC_WORKER_POOL=prefork, the parent's choice, is no pool a Worker can run on).
    os.environ[POOL_ENV] = "threads"
    report = _Reporter(report_fd, spec, recycler)
    try:
        runtime = make_runtime(spec, recycler)
    except BaseException as error:
        logger.error("prefork child %s could not build its worker: %s: %s", spec.tag, type(error).__name__, error)
        report.send({"failed": f"{type(error).__name__}: {error}"})
        return EXIT_FAILED

    def recycle(reason: str) -> None:
        logger.info("prefork child %s (pid %d) recycling: %s", spec.tag, os.getpid(), reason)
        _stop_intake(runtime)
        report.send_now(runtime)
        threading.Thread(target=_quiet_stop, args=(runtime,), name="sync-worker-recycle", daemon=True).start()

    if early:
        cold = signal.SIGQUIT in early or len(early) > 1
        logger.info("prefork child %s stopped before it started (%s)", spec.tag, "cold" if cold else "warm")
        return EXIT_COLD_STOP if cold else EXIT_OK
    recycler.on_recycle = recycle
    report.start(runtime, parent_pid)
    _redeliver_once_served(early, note)
    messages = ServeMessages(warm=f"prefork child {spec.tag} (pid {os.getpid()}): warm shutdown, draining",
                             cold=f"prefork child {spec.tag} (pid {os.getpid()}): cold stop")
    code = serve(runtime, log=logger, messages=messages)
    report.stop()
    report.send_now(runtime, final=True)
    return code


def _redeliver_once_served(early: List[int], note: Any) -> None:
    """Send ourselves again any stop signal noted after the check above, once serve() has put its own
    handlers in place (a watcher thread: serve() installs them on this thread, then blocks)."""
    def watch() -> None:
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if signal.getsignal(signal.SIGTERM) is not note:
                for signum in list(early):
                    os.kill(os.getpid(), signum)
                return
            time.sleep(0.005)

    threading.Thread(target=watch, name="sync-worker-prefork-signals", daemon=True).start()


def _quiet_stop(runtime: Any, cold: bool = False) -> None:
    try:
        runtime.stop(cold=cold)
    except BaseException:  # serve's run thread reports the shared result
        pass


class _Reporter:
    """The child's JSON lines to the parent (a daemon thread; also the orphan watchdog)."""

    def __init__(self, fd: int, spec: ChildSpec, recycler: Recycler) -> None:
        self._fd = fd
        self._spec = spec
        self._recycler = recycler
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._broken = False

    def send(self, data: Dict[str, Any]) -> None:
        if self._broken:
            return
        line = (json.dumps(data, sort_keys=True) + "\n").encode("utf-8")
        with self._lock:
            try:
                os.write(self._fd, line)
            except OSError:
                self._broken = True

    def send_now(self, runtime: Any, final: bool = False) -> None:
        data: Dict[str, Any] = {"pid": os.getpid(), "tag": self._spec.tag, "tasks": self._recycler.finished,
                                "recycle": self._recycler.reason, "rss": resident_bytes(), "final": final}
        try:
            data.update(runtime_summary(runtime))
        except Exception as error:  # a status must never kill the reporter
            data.update(state="unknown", ready=False, live=False, reason=f"status failed: {error}")
        self.send(data)

    def start(self, runtime: Any, parent_pid: int) -> None:
        def loop() -> None:
            orphaned = False
            while not self._done.wait(REPORT_SECONDS):
                self.send_now(runtime)
                if not orphaned and (self._broken or os.getppid() != parent_pid):
                    orphaned = True
                    logger.warning("prefork child %s: the pool's parent is gone; warm shutdown", self._spec.tag)
                    threading.Thread(target=_quiet_stop, args=(runtime,), daemon=True).start()

        self.send_now(runtime)
        self._thread = threading.Thread(target=loop, name="sync-worker-prefork-report", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(2.0)
