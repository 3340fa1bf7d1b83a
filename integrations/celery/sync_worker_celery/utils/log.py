"""``celery.utils.log``: ``get_task_logger`` and ``get_logger``.

Task loggers keep their own name and get ``celery.task`` as their parent, as in Celery, so a logging
configuration written for Celery keeps working.
"""

from __future__ import annotations

import logging

__all__ = ["get_logger", "get_task_logger", "task_logger", "worker_logger"]


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)


task_logger = logging.getLogger("celery.task")
worker_logger = logging.getLogger("celery.worker")


def get_task_logger(name: str) -> logging.Logger:
    """A logger for task modules, a child of ``celery.task`` (as in Celery)."""
    if name in ("celery.task", "celery"):
        raise RuntimeError(f"Logger name {name!r} is reserved!")
    logger = logging.getLogger(name)
    if logger.parent is logging.root:
        logger.parent = task_logger
    return logger
