"""Shutdown of a :class:`~sync_worker.worker.worker.Worker`: drain accepted work within the
deadline while heartbeats go on, then deregister; or, when work is still running (or a cold stop
was asked), abandon it, kill what the backend can and keep the registration. Functions over the
worker (its methods delegate here) so ``worker.py`` stays one concept.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, List, Sequence

from ..runtime.backend import TaskHandle
from ..runtime.status import WorkerState
from .deregistration import deregister

if TYPE_CHECKING:  # pragma: no cover
    from .worker import Worker

__all__ = ["ShutdownIncomplete", "drain_and_deregister", "kill_abandoned"]

logger = logging.getLogger("sync_worker.worker")


class ShutdownIncomplete(RuntimeError):
    """Accepted work was still running at the shutdown deadline; the registration is kept."""

    def __init__(self, message: str, running: Sequence[str]) -> None:
        super().__init__(message)
        self.running = list(running)


def drain_and_deregister(worker: Worker) -> None:
    if not worker._run_started:
        worker._board.set_state(WorkerState.STOPPED)
        return
    # Stop during startup: registration finishes and the pollers it starts exist (so the drain
    # below joins them, and a stop between registration and their start cannot be missed);
    # then the drain deadline starts.
    worker._wait(worker._startup_done)
    if not worker._registered:
        worker._board.set_state(WorkerState.FAILED)
        return
    worker._board.set_state(WorkerState.DRAINING)
    clock = worker.backend.monotonic
    deadline = clock() + worker.shutdown_timeout
    logger.info("worker %s stopping: draining %d task(s) within %.1f s",
                worker.worker_id, worker._inflight.count(), worker.shutdown_timeout)
    drained = worker._inflight.wait_empty(deadline, tick=worker._board.tick, interrupted=worker._cold.is_set)
    for handle in worker._poller_handles:
        handle.join(max(0.0, min(5.0, deadline - clock())))
    stuck_pollers = [h.name for h in worker._poller_handles if h.is_alive()]
    worker.backend.close_idle()  # no new task can come: parked slot threads leave now
    worker._heartbeat_stop.set()
    worker._heartbeat_cancel.cancel()
    if worker._heartbeat_handle is not None:
        worker._heartbeat_handle.join(max(0.0, min(5.0, deadline - clock())))
    if worker._query_client is not None and not stuck_pollers:
        worker._query_client.close()
    if not drained or stuck_pollers:
        running = [f"{t.kind}:{t.task_id}" for t in worker._inflight.snapshot()]
        for inflight in worker._inflight.snapshot():
            inflight.abandon()
        if worker._cold.is_set():
            kill_abandoned(worker, stuck_pollers)
        worker._board.set_state(WorkerState.FAILED)
        why = "cold stop requested" if worker._cold.is_set() else "shutdown deadline reached"
        raise ShutdownIncomplete(
            f"worker {worker.worker_id}: {why} with work still running ({', '.join(running + stuck_pollers)}); "
            "it was abandoned without reporting and the registration is kept",
            running + stuck_pollers,
        )
    try:
        receipt = deregister(worker.client, worker_id=worker.worker_id,
                             registration_token=worker._registration_token, deadline=deadline,
                             clock=clock, sleep=worker.backend.sleep)
    except BaseException:
        worker._board.set_state(WorkerState.FAILED)
        raise
    logger.info("worker %s deregistered (%s)", worker.worker_id, receipt.get("outcome"))
    worker._sticky.clear()
    worker._board.set_state(WorkerState.FAILED if worker._loop_failed else WorkerState.STOPPED)

def kill_abandoned(worker: Worker, stuck_pollers: Sequence[str]) -> None:
    """Cold stop: kill abandoned tasks (and stuck pollers) where the backend can (greenlets)."""
    handles: List[TaskHandle] = [t.handle for t in worker._inflight.snapshot() if t.handle is not None]
    handles += [h for h in worker._poller_handles if h.name in stuck_pollers]
    killed = sum(1 for handle in handles if worker.backend.kill(handle))
    if killed:
        logger.warning("worker %s cold stop: killed %d task(s) at their next cooperative point",
                       worker.worker_id, killed)
