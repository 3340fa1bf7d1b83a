"""sync_worker_celery: a Celery 5 drop-in whose tasks run as durable activities.

Replace ``celery`` with ``sync_worker_celery`` in a module's import lines::

    from sync_worker_celery import Celery, shared_task, chain, group, chord
    from sync_worker_celery.result import AsyncResult
    from sync_worker_celery.exceptions import SoftTimeLimitExceeded
    from sync_worker_celery.signals import task_prerun
    from sync_worker_celery.utils.log import get_task_logger
    from sync_worker_celery.schedules import crontab

Each ``.delay()`` starts a standalone durable activity on the Durable Workflow server; a
chain, group or chord runs as one durable workflow. ``sync-worker celery -A proj worker``
serves them. docs/celery.md lists every API and its status.
"""

from __future__ import annotations

from .app import Celery, current_app, shared_task
from .canvas import Signature, chain, chord, chunks, group, maybe_signature, signature, subtask, xmap, xstarmap
from .task import Task
from .utils import uuid

__version__ = "0.1.0"

#: Celery 5 version this facade mirrors (for code that checks ``celery.VERSION``).
VERSION = (5, 4, 0)

__all__ = [
    "Celery",
    "Signature",
    "Task",
    "VERSION",
    "chain",
    "chord",
    "chunks",
    "current_app",
    "group",
    "maybe_signature",
    "shared_task",
    "signature",
    "subtask",
    "uuid",
    "xmap",
    "xstarmap",
]
