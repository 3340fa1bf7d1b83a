"""Cancellation scopes and the cancellation surface of ``ctx``, exactly as the SDK 2.12 exposes them.

What a workflow can use, and what it gets (the published SDK's behaviour with a server that,
like the dev server and the released server, negotiates no protocol-1.20 cooperative
cancellation):

* ``ctx.is_cancellation_requested``: the task's ``cancel_requested`` flag. A server whose
  ``/cancel`` closes the run at once (the dev server, the released server) never sets it;
* ``ctx.throw_if_cancellation_requested()``: raises :class:`~sync_worker.errors.WorkflowCancelled`
  when the flag is set, except inside ``with ctx.cancellation_shield():`` (nestable);
* ``ctx.cancellation_context``: ``None`` -- metadata exists only for a committed cooperative
  delivery, which needs the 1.20 machinery;
* ``yield from ctx.cancellation_scope(body, shield_parent=False)``: refused. In 2.12 scope
  authoring is a disabled candidate: starting the scope raises
  :class:`~sync_worker.errors.LocalActivityExecutionAborted`
  (``cancellation_scope_execution_not_supported: candidate authoring is disabled``), and a
  history holding scope events or an operation of a non-root scope is refused the same way
  (``...: Python worker cannot replay scoped cancellation history``).

The SDK's worker abandons such a task without a report; sync_worker fails the workflow task with
that reason instead, so it shows on the run. Nothing is written to the history either way and
the run stays open (docs/workflows.md, *Cancellation*).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Generator, Iterable

from ..errors import LocalActivityExecutionAborted

__all__ = ["AUTHORING_DISABLED", "SCOPED_HISTORY", "cancellation_scope", "refuse_scoped_history"]

AUTHORING_DISABLED = "cancellation_scope_execution_not_supported: candidate authoring is disabled"
SCOPED_HISTORY = ("cancellation_scope_execution_not_supported: Python worker cannot replay scoped "
                  "cancellation history")
_SCOPE_EVENTS = frozenset({"CancellationScopeOpened", "CancellationScopeRequested",
                           "CancellationScopeDeliveryPrepared", "CancellationScopeDelivered",
                           "CancellationScopeRequestConflicted"})
_NESTED = ("activity", "timer", "child_workflow")  # a step payload's snapshots that may carry a scope


def cancellation_scope(body: Callable[[], Any], *, shield_parent: bool = False) -> Generator[Any, Any, Any]:
    """``yield from ctx.cancellation_scope(body)``: refused when it starts, as in the SDK 2.12."""
    raise LocalActivityExecutionAborted(AUTHORING_DISABLED)
    yield  # a generator, like the SDK's: nothing happens until the workflow starts it


def refuse_scoped_history(events: Iterable[Mapping[str, Any]]) -> None:
    """Refuse a history recorded with cancellation scopes before any workflow code runs."""
    for event in events:
        kind = event.get("event_type") or event.get("type")
        if kind in _SCOPE_EVENTS:
            raise LocalActivityExecutionAborted(SCOPED_HISTORY)
        payload = event.get("payload")
        # Decoded JSON is a dict: test for that first, the Mapping ABC check is much slower.
        if type(payload) is not dict and not isinstance(payload, Mapping):
            continue
        if payload.get("cancellation_scope_id", "root") != "root":
            raise LocalActivityExecutionAborted(SCOPED_HISTORY)
        for name in _NESTED:
            container = payload.get(name)
            if container is not None and (type(container) is dict or isinstance(container, Mapping)) and (
                    container.get("cancellation_scope_id", "root") != "root"):
                raise LocalActivityExecutionAborted(SCOPED_HISTORY)

