"""What :class:`~sync_worker.nestjs.NestjsWorker` needs from a broker: the transport protocols.

:class:`StepTransport` carries step tasks and results (Redis/BullMQ, PostgreSQL, MySQL, SQS).
:class:`TurnTransport` adds workflow turns and decisions; only the BullMQ transport has it,
because the engine's ``DbTransport`` and ``SqsTransport`` carry no workflow tasks.
Every method may block; none may be async.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from ..cancel import CancelToken
from .steps import step_id_of

if TYPE_CHECKING:  # pragma: no cover
    from .runtime import NestjsWorker

__all__ = ["Delivery", "StepTransport", "TurnTransport"]


class Delivery:
    """One task this worker holds (claimed, lease running) until it is settled or released.

    ``kind`` is ``step`` or ``workflow`` (a turn; its ``step_id`` is then the turn's ``taskId``).
    """

    def __init__(self, task: Dict[str, Any], handle: Any, *, kind: str = "step") -> None:
        self.task = task
        self.handle = handle  # the transport's own reference (a BullJob, a claimed row)
        self.kind = kind
        if kind == "workflow":
            task_id = task.get("taskId")
            self.step_id = task_id if isinstance(task_id, str) and task_id else f"{task.get('runId')}:turn"
        else:
            self.step_id = step_id_of(task)
        self.lost = False  # the lease was taken away: someone else may run the task again
        self.last_beat = 0.0


class StepTransport(Protocol):
    """Steps in, results out."""

    kind: str
    #: Seconds a claim stays ours without renewal (BullMQ lock duration, SQL lease).
    lease_seconds: float

    def open(self, names: Sequence[str], worker: NestjsWorker) -> None:
        """Connect and check the broker is reachable (fail fast); prepare queues/tables."""

    def claim(self) -> Optional[Delivery]:
        """One task moved to us, or None when nothing waits. Never blocks for long."""

    def wait_for_work(self, timeout: float) -> None:
        """Block up to ``timeout`` s or until work may have arrived."""

    def settle(self, delivery: Delivery, result: Dict[str, Any], payload: str) -> None:
        """Deliver the result (JSON ``payload``) to the engine and retire the task."""

    def renew(self, deliveries: Sequence[Delivery]) -> None:
        """Extend the lease of every held task; mark ``lost`` the ones no longer ours."""

    def beat(self, delivery: Delivery) -> None:
        """``heartbeat_sync``: extend this task's lease now and beat the engine's liveness window."""

    def progress(self, delivery: Delivery, event: Dict[str, Any]) -> None:
        """Stream one step event live to the engine (``step.progress``), where the broker can."""

    def maintain(self, now: float) -> None:
        """Periodic work (stalled checks, worker heartbeat keys); called every keeper tick."""

    def release(self, delivery: Delivery) -> None:
        """Give an unfinished task back at once (cold stop) so another worker can run it."""

    def background(self) -> List[Tuple[str, Callable[[CancelToken], None]]]:
        """Extra loops to run until the worker stops, as (name, loop(cancel))."""

    def close(self, *, clean: bool) -> None:
        """Disconnect; ``clean`` (a completed warm stop) also withdraws the worker's liveness keys."""


class TurnTransport(StepTransport, Protocol):
    """A step transport that also carries workflow turns (the engine's BullMQ transport)."""

    def claim_turn(self) -> Optional[Delivery]:
        """One workflow turn moved to us (a ``workflow`` delivery), or None. Never blocks for long."""

    def wait_for_turn(self, timeout: float) -> None:
        """Block up to ``timeout`` s or until a turn may have arrived."""

    def settle_turn(self, delivery: Delivery, decision: Dict[str, Any], payload: str) -> None:
        """Deliver the decision (JSON ``payload``) to the engine and retire the turn."""

    def beat_run(self, delivery: Delivery) -> None:
        """The run-scoped liveness beat of a turn being replayed (re-arms the engine's silence window)."""


def supports_turns(transport: Any) -> bool:
    return all(callable(getattr(transport, name, None))
               for name in ("claim_turn", "wait_for_turn", "settle_turn", "beat_run"))
