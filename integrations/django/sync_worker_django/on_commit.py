"""Start durable work only after the surrounding transaction commits.

Celery's most reported Django pitfall is a task that runs before the row it needs exists
(or after that row was rolled back). :func:`start_workflow_on_commit` and
:func:`start_activity_on_commit` defer the start with ``transaction.on_commit``: inside
``atomic()`` the start is sent after the outermost block commits and never when it rolls
back; outside a transaction it is sent at once.

The id of the workflow (or activity) is chosen up front and returned, so the caller can
store it on the row in the same transaction. Arguments are checked immediately (model
instances, datetimes and Decimals are refused with the path and a hint), so a mistake is
raised where it is made, not later from inside the commit.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Callable, Optional

from .values import check_wire_values

__all__ = ["start_activity_on_commit", "start_workflow_on_commit"]

logger = logging.getLogger("sync_worker.django.on_commit")


def _default_queue() -> str:
    from .conf import get_config

    return get_config().task_queues[0].name


def _schedule(send: Callable[[], Any], using: Optional[str], what: str,
              on_started: Optional[Callable[[Any], None]]) -> None:
    from django.db import transaction

    def after_commit() -> None:
        try:
            result = send()
        except Exception:
            logger.exception("%s after commit failed", what)
            raise
        logger.info("%s sent after commit", what)
        if on_started is not None:
            on_started(result)

    transaction.on_commit(after_commit, using=using)


def start_workflow_on_commit(
    workflow_type: str,
    *args: Any,
    task_queue: Optional[str] = None,
    workflow_id: Optional[str] = None,
    using: Optional[str] = None,
    client: Any = None,
    on_started: Optional[Callable[[Any], None]] = None,
    **options: Any,
) -> str:
    """Start ``workflow_type(*args)`` once the transaction on ``using`` commits; returns the workflow id.

    ``task_queue`` defaults to the first ``TASK_QUEUES`` entry; ``options`` go to
    :meth:`Client.start_workflow` (timeouts, ``duplicate_policy``, ``memo``...);
    ``on_started`` receives the :class:`~sync_worker.WorkflowHandle` after the start.
    """
    check_wire_values(list(args), what=f"start_workflow_on_commit({workflow_type!r})")
    chosen_id = workflow_id or f"wf-{uuid.uuid4().hex}"
    queue = task_queue or _default_queue()

    def send() -> Any:
        from .workers import get_client

        target = client if client is not None else get_client()
        return target.start_workflow(workflow_type, *args, task_queue=queue, workflow_id=chosen_id, **options)

    _schedule(send, using, f"start of workflow {workflow_type!r} ({chosen_id})", on_started)
    return chosen_id


def start_activity_on_commit(
    activity_type: str,
    *args: Any,
    task_queue: Optional[str] = None,
    activity_id: Optional[str] = None,
    using: Optional[str] = None,
    client: Any = None,
    on_started: Optional[Callable[[Any], None]] = None,
    **options: Any,
) -> str:
    """Start a standalone activity once the transaction commits; returns the activity id.

    ``options`` go to :meth:`Client.start_activity` (``retry_policy``, timeouts,
    ``business_key``); ``on_started`` receives the server's receipt.
    """
    check_wire_values(list(args), what=f"start_activity_on_commit({activity_type!r})")
    chosen_id = activity_id or f"act-{uuid.uuid4().hex}"
    queue = task_queue or _default_queue()

    def send() -> Any:
        from .workers import get_client

        target = client if client is not None else get_client()
        return target.start_activity(activity_type, *args, task_queue=queue, activity_id=chosen_id, **options)

    _schedule(send, using, f"start of activity {activity_type!r} ({chosen_id})", on_started)
    return chosen_id
