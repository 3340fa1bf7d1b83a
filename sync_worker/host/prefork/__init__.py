"""The prefork pool: ``-P prefork -c N`` runs N worker processes under one supervising parent.

* :class:`PreforkPool` (:mod:`~sync_worker.host.prefork.supervisor`): the parent; it runs no
  worker itself, forks the children, replaces those that end, recycles, drains them on SIGTERM
  and answers the pool's health probes;
* :func:`split_worker`, :class:`ChildSpec`, :class:`Recycler`
  (:mod:`~sync_worker.host.prefork.roles`): what one child runs;
* :func:`~sync_worker.host.prefork.child.child_main`: the child's life after the fork;
* :class:`PoolStatus` / :class:`ChildStatus` (:mod:`~sync_worker.host.prefork.status`).

Every door (``sync-worker run``, ``sync-worker celery ... worker``, ``manage.py
durable_worker``) builds one of these instead of calling :func:`sync_worker.host.serve` when
``-P prefork`` is asked. See docs/pools.md.
"""

from __future__ import annotations

from .roles import ACTIVITIES, WORKFLOWS, ChildSpec, Recycler, resident_bytes, split_worker
from .serving import close_database_connections, serve_prefork, split_members
from .status import ChildStatus, PoolStatus
from .supervisor import PreforkPool

__all__ = [
    "ACTIVITIES",
    "WORKFLOWS",
    "ChildSpec",
    "ChildStatus",
    "PoolStatus",
    "PreforkPool",
    "Recycler",
    "close_database_connections",
    "resident_bytes",
    "serve_prefork",
    "split_members",
    "split_worker",
]
