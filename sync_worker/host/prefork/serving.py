"""``serve_prefork(workers, processes=N)``: what every door calls for ``-P prefork``.

The door loads its app and builds its workers in the parent as it always does (nothing runs:
building a Worker opens no socket and starts no thread); each child then serves its role's
split of them (:func:`~sync_worker.host.prefork.roles.split_worker`), as one worker or, when
there are several (one per queue), as a group -- the door's own group class when it has one
(the Celery facade's sends Celery's signals in each child, as Celery's prefork children do).
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence

from ..protocols import Servable
from .roles import ACTIVITIES, ChildSpec, Recycler, split_worker
from .supervisor import PreforkPool

if TYPE_CHECKING:  # pragma: no cover
    from ...worker import Worker

__all__ = ["close_database_connections", "serve_prefork", "split_members"]


def split_members(workers: Sequence[Worker], spec: ChildSpec, recycler: Recycler) -> List[Worker]:
    """The child's workers: the split of each worker that has something of ``spec.role`` to serve."""
    wanted = "activities" if spec.role == ACTIVITIES else "workflows"
    return [split_worker(w, spec, recycler=recycler) for w in workers if getattr(w, wanted)]


def close_database_connections() -> None:
    """Close Django's database connections before a fork (a child must open its own): a no-op
    where Django is not loaded or not configured."""
    if "django.db" not in sys.modules:
        return
    try:
        from django.conf import settings

        if not settings.configured:
            return
        from django.db import connections

        connections.close_all()
    except Exception as error:  # never stop a fork over this: log and go on
        logging.getLogger("sync_worker.prefork").warning("could not close Django's connections before "
                                                         "the fork: %s", error)


def serve_prefork(workers: Sequence[Worker], *, processes: int,
                  group: Optional[Callable[[List[Worker]], Servable]] = None,
                  max_tasks_per_child: Optional[int] = None, max_memory_per_child: Optional[int] = None,
                  health_port: Optional[int] = None, health_host: str = "127.0.0.1",
                  log: Optional[logging.Logger] = None) -> int:
    """Serve ``workers`` on a prefork pool of ``processes`` activity children (and one workflow
    child when any has workflows) until signalled; the exit code (:mod:`sync_worker.host.exits`).
    ``max_memory_per_child`` is in bytes."""
    if not workers:
        raise ValueError("serve_prefork needs at least one worker")

    def make_runtime(spec: ChildSpec, recycler: Recycler) -> Servable:
        members = split_members(workers, spec, recycler)
        if group is not None:
            return group(members)
        if len(members) == 1:
            return members[0]
        from ..group import WorkerGroup

        return WorkerGroup(members, name=f"prefork-{spec.tag}")

    pool = PreforkPool(
        make_runtime, processes=processes,
        workflows=any(w.workflows for w in workers),
        activities=any(w.activities for w in workers),
        max_tasks_per_child=max_tasks_per_child, max_memory_per_child=max_memory_per_child,
        shutdown_timeout=max(float(w.shutdown_timeout) for w in workers),
        health_port=health_port, health_host=health_host, before_fork=close_database_connections, log=log)
    return pool.serve()
