"""How a worker joins the server at start-up: discovery, the compatibility check, registration.

One attempt reads and checks the cluster info, decides what the worker advertises (fencing,
query tasks, the sticky queue, command contracts) and registers; :meth:`Registrar.register`
retries attempts through an unreachable or refusing server for ``max_startup_wait`` seconds
(see ``startup.retry_startup``) and keeps the fenced registration token and the heartbeat
interval the server acknowledges.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..protocol import WorkerPlane
from ..runtime.status import RoleTracker
from .registration import (
    registration_body,
    valid_registration_token,
    worker_capabilities,
    workflow_package_capabilities,
)
from .startup import retry_startup
from .sticky import StickyWorkflowCache, check_sticky_support
from .update_validation import REFUSED as VALIDATION_REFUSED
from .update_validation import server_supports_validation
from .workflow_support import WorkflowSet

__all__ = ["Registrar"]


class Registrar:
    """The registration of one worker: what it advertises, the answer it keeps.

    After :meth:`register`: ``registration_token`` (fenced servers), ``query_enabled`` (the
    server hands out query tasks and the worker has workflows) and ``heartbeat_interval``.
    """

    def __init__(
        self,
        *,
        client: WorkerPlane,
        worker_id: str,
        task_queue: str,
        build_id: Optional[str],
        workflows: WorkflowSet,
        activity_types: Callable[[], List[str]],
        sticky: StickyWorkflowCache,
        limits: Callable[[], Tuple[int, int]],
        session_limit: Callable[[], int] = lambda: 10,
        task_slots: Callable[[], Dict[str, int]],
        process_metrics: Callable[[], Dict[str, Any]],
        tracker: RoleTracker,
        heartbeat_interval: float,
        max_startup_wait: float,
        clock: Callable[[], float],
        stop_wait: Callable[[float], Any],
        url: str,
    ) -> None:
        self.client = client
        self.worker_id, self.task_queue, self.build_id = worker_id, task_queue, build_id
        self.workflows = workflows
        self._activity_types = activity_types
        self.sticky = sticky
        self._limits = limits
        self._session_limit = session_limit
        self._task_slots = task_slots
        self._process_metrics = process_metrics
        self.tracker = tracker
        self.heartbeat_interval = float(heartbeat_interval)
        self.max_startup_wait = max_startup_wait
        self._clock, self._stop_wait, self._url = clock, stop_wait, url
        self.registration_token: Optional[str] = None
        self.query_enabled = False
        #: the workflows declare update validators (and the server validates before accepting)
        self.validation_enabled = False

    def register(self) -> None:
        """Register (retrying through start-up failures); raises when the server never accepts."""
        tracker = self.tracker
        tracker.request_started()
        try:
            ack, fenced = retry_startup(self.discover_and_register, url=self._url, max_wait=self.max_startup_wait,
                                        clock=self._clock, wait=self._stop_wait)
        except BaseException as error:
            tracker.request_failed(error)
            raise
        try:
            self._accept(ack, fenced)
        except RuntimeError as error:
            tracker.request_failed(error)
            raise
        tracker.request_succeeded()

    def register_again(self) -> None:
        """One registration attempt after the server forgot this worker (no start-up retries:
        the caller's back-off repeats it); raises what the attempt raised."""
        self._accept(*self.discover_and_register())

    def _accept(self, ack: Any, fenced: bool) -> None:
        if fenced:
            token = valid_registration_token(ack if isinstance(ack, Mapping) else {}, self.worker_id)
            if token is None:
                raise RuntimeError(f"worker {self.worker_id}: invalid registration_token acknowledgement")
            self.registration_token = token
        self.adopt_heartbeat_interval(ack)

    def discover_and_register(self) -> Tuple[Any, bool]:
        """One start-up attempt: read and check cluster info, then register; ``(ack, fenced)``."""
        client = self.client
        client.validate_worker_compatibility(refresh=True)
        capabilities: Mapping[str, Any] = client.server_capabilities() or {}
        fencing = capabilities.get("worker_deregistration_fencing")
        fenced = fencing is True or (isinstance(fencing, Mapping) and fencing.get("supported") is True)
        self.query_enabled = bool(self.workflows) and capabilities.get("query_tasks") is True
        check_sticky_support(self.sticky, capabilities)
        contracts = self.workflows.command_contracts()
        has_validators = self.workflows.has_validators(contracts)
        if has_validators and not server_supports_validation(capabilities):
            raise RuntimeError(VALIDATION_REFUSED)
        self.validation_enabled = has_validators
        sticky = self.sticky.enabled
        workflow_limit, activity_limit = self._limits()
        body = registration_body(
            worker_id=self.worker_id,
            task_queue=self.task_queue,
            workflow_types=self.workflows.names(),
            activity_types=self._activity_types(),
            fingerprints=self.workflows.fingerprints(),
            command_contracts=contracts,
            capabilities=worker_capabilities(
                has_workflows=bool(self.workflows), server_capabilities=capabilities,
                workflow_capabilities=workflow_package_capabilities(),
                has_updates=self.workflows.has_updates(contracts), sticky=sticky, has_validators=has_validators,
            ),
            sticky=sticky,
            build_id=self.build_id,
            max_concurrent_workflow_tasks=workflow_limit,
            max_concurrent_activity_tasks=activity_limit,
            max_concurrent_worker_sessions=self._session_limit(),
            task_slots=self._task_slots(),
            process_metrics=self._process_metrics(),
        )
        return client.register_worker(body), fenced

    def adopt_heartbeat_interval(self, ack: Any) -> None:
        """Take the heartbeat interval the server acknowledged, when it gave a positive int."""
        if isinstance(ack, Mapping):
            advertised = ack.get("heartbeat_interval_seconds")
            if isinstance(advertised, int) and not isinstance(advertised, bool) and advertised > 0:
                self.heartbeat_interval = float(advertised)
