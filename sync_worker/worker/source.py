"""The Durable Workflow task source: registration, long-poll pollers, heartbeat, deregistration.

On the runtime shell (``sync_worker.runtime.shell``) it

* **joins** by registering (``joining.Registrar``: discovery, compatibility, fencing, retries);
* **starts** the registration heartbeat and the pollers of each configured role (workflow and
  activity: ``max_concurrent_*_task_polls`` each, every one polling only with a reserved free
  slot; query: one, on a cloned client and connection pool). Pollers are the shell's critical
  intake loops; each hands what it receives to the :class:`~sync_worker.worker.dispatch.TaskDispatcher`;
* **stops intake** by cancelling the poll token (in-flight long polls abort at once);
* **winds down** the heartbeat after the drain and **closes** by deregistering (fenced when the
  server supports it) -- or, when work was abandoned, keeps the registration so the server
  recovers the leases.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..cancel import CancelToken
from ..protocol import WorkerPlane
from ..protocol.routes import MULTIPLEXED_TASK_KINDS
from ..runtime.backend import ConcurrencyBackend
from ..runtime.metrics import MetricsRecorder
from ..runtime.shell import RuntimeShell
from ..runtime.slots import SlotPool
from ..runtime.status import RoleTracker, StatusBoard
from .deregistration import deregister
from .dispatch import TaskDispatcher
from .joining import Registrar
from .pollers import DispatchFn, Poller, poll_timeout_seconds
from .recovery import ServerContact, run_heartbeat
from .rejoin import Rejoin
from .sticky import StickyWorkflowCache

__all__ = ["DurableWorkflowSource"]

logger = logging.getLogger("sync_worker.worker")

#: How long, at most, shutdown waits for the pollers to end before draining.
POLLER_GRACE_SECONDS = 5.0

TrackerFactory = Callable[[str, bool], RoleTracker]


class DurableWorkflowSource:
    """One task queue of the Durable Workflow server as a :class:`~sync_worker.runtime.shell.TaskSource`."""

    def __init__(
        self,
        *,
        client: WorkerPlane,
        backend: ConcurrencyBackend,
        board: StatusBoard,
        metrics: MetricsRecorder,
        registrar: Registrar,
        dispatcher: TaskDispatcher,
        sticky: StickyWorkflowCache,
        tracker: TrackerFactory,
        heartbeat_role: RoleTracker,
        heartbeat_body: Callable[[], Dict[str, Any]],
        poll_cancel: CancelToken,
        contact: ServerContact,
        worker_id: str,
        task_queue: str,
        build_id: Optional[str],
        poll_timeout: float,
        owns_client: bool = False,
        sessions: Optional[Any] = None,
    ) -> None:
        self.client, self.backend, self.board, self.metrics = client, backend, board, metrics
        #: the worker made this client (a clone carrying its external storage): closed after deregistration
        self.owns_client = owns_client
        self.registrar, self.dispatcher, self.sticky = registrar, dispatcher, sticky
        self.rejoin = Rejoin(registrar)
        self._tracker, self.heartbeat_role, self._heartbeat_body = tracker, heartbeat_role, heartbeat_body
        self.poll_cancel, self.contact = poll_cancel, contact
        self.worker_id, self.task_queue, self.build_id = worker_id, task_queue, build_id
        self.poll_timeout = poll_timeout
        self.heartbeat_stop = backend.event()
        self.heartbeat_cancel = CancelToken(backend.event)
        self.pollers: List[Poller] = []
        #: (role, slot pool, pollers) per polled role, set by the worker before it runs
        self.roles: List[Any] = []
        self.query_client: Optional[WorkerPlane] = None
        self.pool_name = backend.name
        #: the worker's session leases: renewed on the heartbeat, closed before deregistration
        self.sessions = sessions

    # -- TaskSource --------------------------------------------------------------------------

    def join(self) -> None:
        self.registrar.register()

    def start(self, shell: RuntimeShell) -> None:
        self.heartbeat_role.started()
        shell.spawn_loop(f"sync-worker-heartbeat-{self.worker_id}", self._heartbeat_loop, role="heartbeat",
                         critical=False)
        self.start_pollers(shell)

    def start_pollers(self, shell: RuntimeShell) -> None:
        seconds = poll_timeout_seconds(self.poll_timeout)
        common = {"worker_id": self.worker_id, "task_queue": self.task_queue, "timeout_seconds": seconds,
                  "build_id": self.build_id}
        client, dispatcher, guard = self.client, self.dispatcher, self.rejoin.guard
        for kind, pool, count in self.roles:
            if kind == "workflow":
                self.dispatcher.workflows.registry()  # built once here, not raced by the first task threads
                # validators: one multiplexed poll per free workflow slot carries either kind (§4.10)
                kinds = list(MULTIPLEXED_TASK_KINDS) if self.registrar.validation_enabled else None
                self._add(shell, kind, guard(functools.partial(_poll_workflow, client, dict(common, task_kinds=kinds))),
                          dispatcher.workflow, pool, count, seconds)
            elif kind == "activity":
                self._add(shell, kind, guard(functools.partial(_poll_activity, client, common)), dispatcher.activity,
                          pool, count, seconds)
        if self.registrar.query_enabled:
            self.query_client = client.clone()
            dispatcher.query_client = self.query_client
            self._add(shell, "query", guard(functools.partial(_poll_query, self.query_client, common)),
                      dispatcher.query, None, 1, seconds)

    def _add(self, shell: RuntimeShell, kind: str, poll: Callable[[str, CancelToken], Optional[Dict[str, Any]]],
             dispatch: DispatchFn, pool: Optional[SlotPool], count: int, seconds: int) -> None:
        tracker = self.board.add_role(self._tracker(kind, True))
        tracker.started()
        # More pollers than slots could never all poll at once: each waits for a slot first.
        count = max(1, min(count, pool.capacity if pool is not None else 1))
        for index in range(count):
            poller = Poller(kind=kind, task_queue=self.task_queue, backend=self.backend, poll=poll, dispatch=dispatch,
                            cancel=self.poll_cancel, tracker=tracker, metrics=self.metrics, pool=pool,
                            wait_seconds=seconds, contact=self.contact, inline=pool is not None and count > 1)
            self.pollers.append(poller)
            name = f"sync-worker-{kind}-poller" + (f"-{index + 1}" if index else "")
            shell.spawn_loop(name, poller.run, role=f"{kind} poller", critical=True, intake=True)

    def stop_intake(self) -> None:
        self.poll_cancel.cancel()

    def intake_grace(self) -> float:
        return POLLER_GRACE_SECONDS

    def wind_down(self, deadline: float, *, stuck: bool) -> None:
        self.heartbeat_stop.set()
        self.heartbeat_cancel.cancel()
        if self.query_client is not None and not stuck:
            self.query_client.close()

    def hand_back(self) -> None:
        """Nothing to hand back: the registration is kept, so the server recovers the leases."""

    def close(self, *, clean: bool, deadline: float) -> None:
        if not clean:
            return
        self.rejoin.close()  # a refusal racing the deregistration must not register the worker again
        if self.sessions is not None:  # §3.4: close every active session before deregistering
            self.sessions.close_all(deadline=deadline)
        receipt = deregister(self.client, worker_id=self.worker_id,
                             registration_token=self.registrar.registration_token, deadline=deadline,
                             clock=self.backend.monotonic, sleep=self.backend.sleep)
        logger.info("worker %s deregistered (%s)", self.worker_id, receipt.get("outcome"))
        self.sticky.clear()
        if self.owns_client:
            self.client.close()

    def abort(self) -> None:
        """Registration never succeeded: nothing to undo."""

    def describe_running(self) -> str:
        workflows, activities = len(self.dispatcher.workflows), len(self.dispatcher.activities)
        return (f"worker {self.worker_id} running on task queue {self.task_queue!r} "
                f"(pool {self.pool_name}; {workflows} workflow, {activities} activity types)")

    def describe_incomplete(self, why: str, running: Sequence[str]) -> str:
        return (f"worker {self.worker_id}: {why} with work still running ({', '.join(running)}); "
                "it was abandoned without reporting and the registration is kept")

    # -- heartbeat ---------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        @self.rejoin.guard
        def send() -> Any:
            ack = self.client.heartbeat_worker(self._heartbeat_body(), cancel=self.heartbeat_cancel)
            if sessions is not None:  # session leases ride on the registration heartbeat
                sessions.renew_due()
            return ack

        sessions = self.sessions

        def interval() -> float:
            base = self.registrar.heartbeat_interval
            return base if sessions is None else sessions.heartbeat_interval(base)

        run_heartbeat(send=send, interval=interval, stop=self.heartbeat_stop,
                      cancel=self.heartbeat_cancel, tracker=self.heartbeat_role, contact=self.contact,
                      on_ack=self.registrar.adopt_heartbeat_interval, clock=self.backend.monotonic)


def _poll_workflow(client: WorkerPlane, common: Dict[str, Any], poll_request_id: str,
                   cancel: CancelToken) -> Optional[Dict[str, Any]]:
    return client.poll_workflow_task(poll_request_id=poll_request_id, cancel=cancel, **common)


def _poll_activity(client: WorkerPlane, common: Dict[str, Any], poll_request_id: str,
                   cancel: CancelToken) -> Optional[Dict[str, Any]]:
    return client.poll_activity_task(poll_request_id=poll_request_id, cancel=cancel, **common)


def _poll_query(client: WorkerPlane, common: Dict[str, Any], poll_request_id: str,
                cancel: CancelToken) -> Optional[Dict[str, Any]]:
    return client.poll_query_task(poll_request_id=poll_request_id, cancel=cancel, **common)
