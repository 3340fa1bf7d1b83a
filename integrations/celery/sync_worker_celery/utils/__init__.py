"""Celery's ``celery.utils`` helpers that task modules import (``uuid``, ``log``)."""

from __future__ import annotations

import uuid as _uuid

__all__ = ["gen_unique_id", "uuid"]


def uuid() -> str:
    """A new task id (a random UUID string), as ``celery.utils.uuid()``."""
    return str(_uuid.uuid4())


gen_unique_id = uuid
