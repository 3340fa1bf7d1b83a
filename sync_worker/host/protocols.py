"""What the host needs of a runtime: the small typed surface every door runs through.

:class:`sync_worker.Worker` (the Durable Workflow long poll) and
:class:`sync_worker.nestjs.NestjsWorker` (the nestjs-durable transports) both satisfy
:class:`Runtime` as they are; a :class:`~sync_worker.host.WorkerGroup` of them satisfies
:class:`Servable`, which is all :func:`~sync_worker.host.serve` asks for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from ..worker import WorkerStatus

__all__ = ["Runtime", "Servable"]


class Servable(Protocol):
    """Something :func:`~sync_worker.host.serve` can run in the foreground and stop from a signal."""

    def run(self) -> None:
        """Block until stopped; raise what ended the run (``ShutdownIncomplete`` for an unfinished drain)."""
        ...

    def stop(self, *, cold: bool = False) -> None:
        """Stop from any thread: warm (drain) or ``cold`` (abandon running work); repeatable."""
        ...


class Runtime(Servable, Protocol):
    """One runtime of a process: a member of a :class:`~sync_worker.host.WorkerGroup`."""

    @property
    def worker_id(self) -> str: ...

    @property
    def pool(self) -> str:
        """The concurrency pool it runs on: ``threads`` or ``gevent``."""
        ...

    def status(self) -> WorkerStatus:
        """A readiness/liveness snapshot; no network I/O; safe from any thread."""
        ...
