"""``PreforkPool``: a parent that supervises worker processes, so CPU-bound activities use every core.

The shape (docs/pools.md says why): each child is a whole single-role worker that polls the
server for itself, as gunicorn's workers each accept; the parent runs no worker, holds no
connection to the server and starts no thread, so forking a replacement at any time copies no
lock, socket or thread. ``processes`` children serve activities with one slot each (Celery's
``-c N``: N processes, one task each); one more child serves the workflow and query tasks when
the worker has workflows (replay is cheap and the sticky cache wants one home).

The parent's loop waits on one ``select``: the signal wake-up pipe (SIGTERM/SIGINT/SIGQUIT and
SIGCHLD), each child's report pipe and the health socket. It

* replaces a child that ends while the pool runs (recycled, crashed, ``kill -9``-ed); a child
  killed mid-task leaves its lease to expire, and the server retries the task (at least once);
  a child that exits with an error before it ever ran (it retried its start-up for the worker's
  ``max_startup_wait`` first) fails the pool (exit 1), as a single-process worker would;
* on the first SIGTERM/SIGINT sends SIGTERM to every child (each drains within its
  ``shutdown_timeout``: the deadline is shared) and waits; past that deadline plus a grace it
  SIGKILLs what is left (exit 3); a second signal, or SIGQUIT, sends SIGQUIT (each child stops
  cold, exit 4). Exit codes are :mod:`sync_worker.host.exits`'.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import selectors
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from ..exits import EXIT_COLD_STOP, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK
from .child import STOP_SIGNALS, MakeRuntime, child_main
from .roles import ACTIVITIES, WORKFLOWS, ChildSpec, Recycler
from .status import ChildStatus, PoolHealthServer, PoolStatus

__all__ = ["PreforkPool"]

logger = logging.getLogger("sync_worker.prefork")

#: After the drain deadline, how long children get to deregister before they are killed.
KILL_GRACE_SECONDS = 10.0
#: A child that exits with an error before it ever ran this many times in a row fails the pool. One:
#: the child already retried discovery and registration for the worker's ``max_startup_wait``
#: (as a single-process worker does before it exits 1), so its failure is the pool's.
MAX_STARTUP_FAILURES = 1
#: The parent's loop looks at its timers at least this often.
LOOP_SECONDS = 1.0


@dataclass
class _Slot:
    role: str
    index: int
    generation: int = -1
    pid: Optional[int] = None
    fd: Optional[int] = None
    buffer: bytes = b""
    report: Dict[str, Any] = field(default_factory=dict)
    ran: bool = False
    startup_failures: int = 0
    respawn_at: Optional[float] = None

    def spec(self) -> ChildSpec:
        return ChildSpec(self.role, self.index, self.generation)


def _describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:  # pragma: no cover
            return f"killed by signal {number}"
    return f"exited with code {os.WEXITSTATUS(status) if os.WIFEXITED(status) else status}"


class PreforkPool:
    """Run ``make_runtime(spec, recycler)`` in child processes; see the module docstring.

    ``make_runtime`` runs in the child, after the fork: it builds the runtime for ``spec.role``
    (``"activities"`` or ``"workflows"``) with ``recycler`` among its interceptors
    (:func:`~sync_worker.host.prefork.split_worker` does both for a loaded Worker).
    ``before_fork`` runs in the parent before every fork (the Django door closes its database
    connections there). ``max_memory_per_child`` is in bytes.
    """

    def __init__(self, make_runtime: MakeRuntime, *, processes: int, workflows: bool, activities: bool = True,
                 max_tasks_per_child: Optional[int] = None, max_memory_per_child: Optional[int] = None,
                 shutdown_timeout: float = 30.0, health_port: Optional[int] = None,
                 health_host: str = "127.0.0.1", before_fork: Optional[Callable[[], None]] = None,
                 log: Optional[logging.Logger] = None) -> None:
        if processes < 1:
            raise ValueError("a prefork pool needs at least one process")
        if not workflows and not activities:
            raise ValueError("a prefork pool needs workflows or activities to serve")
        self.processes = processes
        self._make_runtime = make_runtime
        self.max_tasks_per_child = max_tasks_per_child
        self.max_memory_per_child = max_memory_per_child
        self.shutdown_timeout = float(shutdown_timeout)
        self._health_port = health_port
        self._health_host = health_host
        self._before_fork = before_fork
        self._log = log if log is not None else logger
        self._slots: List[_Slot] = []
        if activities:
            self._slots += [_Slot(ACTIVITIES, i) for i in range(processes)]
        if workflows:
            self._slots.append(_Slot(WORKFLOWS, 0))
        self._selector: Optional[selectors.BaseSelector] = None
        self._wake_r = self._wake_w = -1
        self._health: Optional[PoolHealthServer] = None
        self._state = "starting"
        self._warm = self._cold = False
        self._warm_sent = self._cold_sent = False
        self._deadline: Optional[float] = None
        self._failed: Optional[str] = None
        self._stop_codes: List[int] = []
        self._killed = False
        self.replaced = 0
        self.recycled = 0

    # -- status -----------------------------------------------------------------------------------

    @property
    def health_port(self) -> Optional[int]:
        return self._health.port if self._health is not None else None

    def status(self) -> PoolStatus:
        """The pool and each child as last reported (no I/O)."""
        children = []
        for slot in self._slots:
            report = slot.report
            alive = slot.pid is not None
            children.append(ChildStatus(
                tag=slot.spec().tag, role=slot.role, index=slot.index, pid=slot.pid, alive=alive,
                state=str(report.get("state", "starting")) if alive else "exited",
                ready=alive and bool(report.get("ready")), live=alive and bool(report.get("live", True)),
                reason=str(report.get("reason", "") or ("starting" if alive else "not running")),
                tasks=int(report.get("tasks", 0) or 0), worker_ids=tuple(report.get("worker_ids", ())),
                workers=tuple(report.get("workers", ())) if alive else ()))
        not_ready = [f"{c.tag}: {c.reason or c.state}" for c in children if not c.ready]
        if self._state != "running":
            not_ready.insert(0, f"pool {self._state}")
        not_live = [f"{c.tag}: {c.state}" for c in children if c.alive and not c.live]
        if self._failed:
            not_live.insert(0, self._failed)
        return PoolStatus(pool="prefork", state=self._state, ready=not not_ready, ready_reason="; ".join(not_ready),
                          live=not not_live, live_reason="; ".join(not_live), children=tuple(children),
                          replaced=self.replaced, recycled=self.recycled)

    # -- running ----------------------------------------------------------------------------------

    def serve(self) -> int:
        """Start the children and supervise them until they are stopped; the exit code. Main thread only."""
        if threading.active_count() > 1:
            self._log.warning("prefork: %d threads run in the parent before the fork (%s); children get only "
                              "the forking one", threading.active_count(),
                              ", ".join(t.name for t in threading.enumerate() if t is not threading.current_thread()))
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        previous_fd = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        previous = {signum: signal.signal(signum, self._on_signal)
                    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGCHLD)}
        try:
            if self._health_port is not None:
                self._health = PoolHealthServer(self._health_port, self._health_host, self.status)
                self._selector.register(self._health.fileno(), selectors.EVENT_READ, "health")
                self._log.info("prefork pool health probes on http://%s:%d/healthz and /readyz",
                               self._health_host, self._health.port)
            self._log.info("prefork pool (pid %d): %d activity process(es)%s; recycling after %s task(s) / %s",
                           os.getpid(), sum(1 for s in self._slots if s.role == ACTIVITIES),
                           " and 1 workflow process" if any(s.role == WORKFLOWS for s in self._slots) else "",
                           self.max_tasks_per_child or "unlimited",
                           f"{self.max_memory_per_child // 1024} KiB" if self.max_memory_per_child
                           else "no memory limit")
            for slot in self._slots:
                self._spawn(slot)
            self._loop()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            signal.set_wakeup_fd(previous_fd)
            if self._health is not None:
                self._health.close()
            self._selector.close()
            os.close(self._wake_r)
            os.close(self._wake_w)
        return self._exit_code()

    def _exit_code(self) -> int:
        if self._cold_sent:
            return EXIT_COLD_STOP
        if self._failed or EXIT_FAILED in self._stop_codes:
            if self._failed:
                self._log.error("prefork pool failed: %s", self._failed)
            return EXIT_FAILED
        if self._killed or EXIT_INCOMPLETE in self._stop_codes or EXIT_COLD_STOP in self._stop_codes:
            return EXIT_INCOMPLETE
        return EXIT_OK

    def _on_signal(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGCHLD:
            return  # the wake-up pipe got its byte: the loop reaps
        if signum == signal.SIGQUIT or self._warm:
            self._cold = True
        self._warm = True

    def _loop(self) -> None:
        assert self._selector is not None
        while True:
            for key, _ in self._selector.select(LOOP_SECONDS):
                if key.data == "wake":
                    self._drain_wakeups()
                elif key.data == "health":
                    assert self._health is not None
                    self._health.handle()
                else:
                    self._read(key.data)
            self._reap()
            self._act_on_signals()
            if self._failed and self._state in ("starting", "running"):
                self._begin_stop(cold=False)
            if self._state in ("starting", "running"):
                self._respawn_due()
                if self._state == "starting" and all(s.ran for s in self._slots):
                    self._state = "running"
            if self._state == "draining":
                if all(slot.pid is None for slot in self._slots):
                    self._state = "stopped"
                    return
                if self._deadline is not None and time.monotonic() > self._deadline:
                    self._kill_remaining()

    def _drain_wakeups(self) -> None:
        while True:
            try:
                if not os.read(self._wake_r, 512):
                    return
            except BlockingIOError:
                return

    def _act_on_signals(self) -> None:
        if self._cold and not self._cold_sent:
            self._log.warning("prefork pool: cold stop: each child abandons its running work")
            self._begin_stop(cold=True)
        elif self._warm and not self._warm_sent:
            self._log.info("prefork pool: warm shutdown: every child drains within %.1f s (send the signal "
                           "again, or SIGQUIT, to stop at once)", self.shutdown_timeout)
            self._begin_stop(cold=False)

    def _begin_stop(self, *, cold: bool) -> None:
        self._warm_sent = True
        if cold:
            self._cold_sent = True
        if self._deadline is None:
            self._deadline = time.monotonic() + self.shutdown_timeout + KILL_GRACE_SECONDS
        self._state = "draining"
        for slot in self._slots:
            slot.respawn_at = None
            if slot.pid is not None:
                self._signal(slot.pid, signal.SIGQUIT if cold else signal.SIGTERM)

    def _kill_remaining(self) -> None:
        for slot in self._slots:
            if slot.pid is not None and self._signal(slot.pid, signal.SIGKILL):
                self._killed = True
                self._log.error("prefork child %s (pid %d) still running past the shutdown deadline: killed",
                                slot.spec().tag, slot.pid)
        self._deadline = time.monotonic() + KILL_GRACE_SECONDS  # reaping SIGKILLed children is prompt

    @staticmethod
    def _signal(pid: int, signum: int) -> bool:
        try:
            os.kill(pid, signum)
            return True
        except ProcessLookupError:
            return False

    # -- children ---------------------------------------------------------------------------------

    def _spawn(self, slot: _Slot) -> None:
        assert self._selector is not None
        slot.generation += 1
        slot.respawn_at = None
        slot.report = {}
        slot.buffer = b""
        if self._before_fork is not None:
            self._before_fork()
        read_fd, write_fd = os.pipe()
        inherited = [self._wake_r, self._wake_w, read_fd, self._selector_fd()]
        inherited += [s.fd for s in self._slots if s.fd is not None]
        if self._health is not None:
            inherited.append(self._health.fileno())
        recycler = Recycler(max_tasks=self.max_tasks_per_child, max_memory_bytes=self.max_memory_per_child)
        # Stop signals wait (pending) across the fork: the parent's after it, the child's until it
        # has its own handlers (it unblocks them then).
        previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:  # the child: never returns
                child_main(slot.spec(), self._make_runtime, report_fd=write_fd, parent_pid=os.getppid(),
                           close_fds=inherited, recycler=recycler)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        slot.pid, slot.fd = pid, read_fd
        self._selector.register(read_fd, selectors.EVENT_READ, slot)
        self._log.info("prefork child %s started (pid %d)", slot.spec().tag, pid)

    def _selector_fd(self) -> int:
        fileno = getattr(self._selector, "fileno", None)
        return int(fileno()) if callable(fileno) else -1

    def _read(self, slot: _Slot) -> None:
        if slot.fd is None:
            return
        try:
            data = os.read(slot.fd, 65536)
        except BlockingIOError:
            return
        except OSError as error:  # pragma: no cover
            if error.errno != errno.EBADF:
                raise
            return
        if not data:
            self._close_pipe(slot)
            return
        slot.buffer += data
        *lines, slot.buffer = slot.buffer.split(b"\n")
        for line in lines:
            try:
                report = json.loads(line)
            except ValueError:
                continue
            if report.get("pid") not in (None, slot.pid):
                continue
            slot.report.update(report)
            if report.get("state") == "running":
                slot.ran = True
                slot.startup_failures = 0

    def _close_pipe(self, slot: _Slot) -> None:
        if slot.fd is not None and self._selector is not None:
            self._selector.unregister(slot.fd)
            os.close(slot.fd)
            slot.fd = None

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            slot = next((s for s in self._slots if s.pid == pid), None)
            if slot is None:
                continue
            if slot.fd is not None:
                self._read(slot)  # its last report
                self._close_pipe(slot)
            slot.pid = None
            self._ended(slot, status)

    def _ended(self, slot: _Slot, status: int) -> None:
        tag, how = slot.spec().tag, _describe_exit(status)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        if self._state in ("draining", "stopped"):
            self._stop_codes.append(code if code is not None else EXIT_INCOMPLETE)
            log = self._log.info if code == EXIT_OK else self._log.warning
            log("prefork child %s %s", tag, how)
            return
        recycle = slot.report.get("recycle")
        if recycle and code == EXIT_OK:
            self.recycled += 1
            self._log.info("prefork child %s recycled (%s); starting a replacement", tag, recycle)
        elif not slot.ran and code is not None and code != EXIT_OK:
            slot.startup_failures += 1
            self._log.error("prefork child %s %s before it ever ran (%d time(s) in a row)", tag, how,
                            slot.startup_failures)
            if slot.startup_failures >= MAX_STARTUP_FAILURES:
                self._failed = f"child {tag} failed {slot.startup_failures} times before it ran"
                return
        else:
            self._log.warning("prefork child %s %s while the pool runs; starting a replacement (a task it was "
                              "running is retried by the server once its lease expires)", tag, how)
        self.replaced += 1
        backoff = 0.0 if slot.ran else min(5.0, 0.5 * 2 ** max(0, slot.startup_failures - 1))
        slot.ran = False
        slot.respawn_at = time.monotonic() + backoff

    def _respawn_due(self) -> None:
        now = time.monotonic()
        for slot in self._slots:
            if slot.pid is None and slot.respawn_at is not None and now >= slot.respawn_at:
                self._spawn(slot)
