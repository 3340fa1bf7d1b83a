"""Durable message streams: ``ctx.message_stream(name).receive(max_items)`` / ``.receive_one()``.

A stream is ordered, deduplicated input appended through the control plane
(``POST /api/workflows/{id}/message-streams/{stream}/messages``). The server records each
message as a ``SignalReceived`` under the reserved name ``__durable_workflow_message_stream``
whose single argument is ``{"schema": MESSAGE_SCHEMA, "stream_name", "message_id",
"position", "payload_envelope"}``; replay applies those receivers in history order into a
per-run :class:`StreamInbox` instead of a user handler.

Consumption is replay-safe because all of it is derived from history:

* ``receive`` returns at once when messages are queued; otherwise it records a *wait*
  (``stream -> cursor``) and yields a condition wait keyed ``message-stream:<name>:<cursor>``
  whose predicate is "this stream has a queued message". The wait carries the published
  SDK's predicate fingerprint, so histories move between both workers.
* taking a batch moves the stream's *cursor* to the last position taken.
* every task completion reports the cursors (``message_stream_cursors``) and the open waits
  (``message_stream_waits``), sorted by stream name (protocol §4.5).

Cursor checkpoints (same reserved signal, ``schema: CURSOR_SCHEMA``, ``through_position``)
carry consumption across continue-as-new: they are applied before the workflow starts, and
again in order (applying one twice is harmless).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generator, List

from .. import payloads
from .commands import WaitCondition
from .definition import MESSAGE_STREAM_SIGNAL

__all__ = ["CURSOR_SCHEMA", "MAX_BATCH", "MESSAGE_SCHEMA", "MESSAGE_STREAM_SIGNAL", "MessageStream",
           "MessageStreamMessage", "StreamInbox", "is_cursor_checkpoint", "validate_stream_name"]

MESSAGE_SCHEMA = "durable-workflow.v2.message-stream.message"
CURSOR_SCHEMA = "durable-workflow.v2.message-stream.cursor"
#: Largest ``max_items`` one ``receive`` may ask for.
MAX_BATCH = 100
_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-")


def validate_stream_name(name: Any) -> str:
    """A portable stream name: 1-128 characters of ``[A-Za-z0-9._:-]`` (else ``ValueError``)."""
    if not isinstance(name, str) or not 1 <= len(name) <= 128:
        raise ValueError("message stream name must contain 1-128 characters")
    if not set(name) <= _NAME_CHARACTERS:
        raise ValueError("message stream name contains unsupported characters")
    return name


def _position(value: Any, minimum: int) -> int:
    """``value`` if it is a real int (not a bool) >= ``minimum``, else -1."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
        return value
    return -1


def is_cursor_checkpoint(arguments: List[Any]) -> bool:
    """Whether decoded reserved-signal arguments are a cursor checkpoint (not a message)."""
    return (len(arguments) == 1 and isinstance(arguments[0], Mapping)
            and arguments[0].get("schema") == CURSOR_SCHEMA)


@dataclass(frozen=True)
class MessageStreamMessage:
    """One message taken from a stream, in server order (``position`` starts at 1)."""

    stream_name: str
    message_id: str
    position: int
    arguments: List[Any]


@dataclass
class StreamInbox:
    """What this replay knows about its streams: queued messages, cursors and open waits."""

    queued: Dict[str, List[MessageStreamMessage]] = field(default_factory=dict)
    cursors: Dict[str, int] = field(default_factory=dict)
    waits: Dict[str, int] = field(default_factory=dict)

    def has_pending(self, name: str) -> bool:
        return bool(self.queued.get(name))

    def cursor(self, name: str) -> int:
        return self.cursors.get(name, 0)

    def accept(self, arguments: List[Any]) -> None:
        """Apply one reserved-signal delivery; malformed or stale input is ignored, never raised."""
        if len(arguments) != 1 or not isinstance(arguments[0], Mapping):
            return
        body = arguments[0]
        name = body.get("stream_name")
        if not isinstance(name, str):
            return
        if body.get("schema") == CURSOR_SCHEMA:
            through = _position(body.get("through_position"), 0)
            if through >= 0:
                self.cursors[name] = max(through, self.cursor(name))
                self.queued[name] = [m for m in self.queued.get(name, []) if m.position > through]
            return
        message_id, position = body.get("message_id"), _position(body.get("position"), 1)
        envelope = body.get("payload_envelope")
        if (body.get("schema") != MESSAGE_SCHEMA or not isinstance(message_id, str) or position < 1
                or not isinstance(envelope, Mapping)):
            return
        try:
            values = payloads.decode_envelope(dict(envelope))
        except (TypeError, ValueError):  # PayloadError is a ValueError
            return
        if not isinstance(values, list) or position <= self.cursor(name):
            return
        queue = self.queued.setdefault(name, [])
        if any(m.position == position or m.message_id == message_id for m in queue):
            return  # a redelivery of something already queued
        queue.append(MessageStreamMessage(name, message_id, position, list(values)))
        queue.sort(key=lambda message: message.position)

    def take(self, name: str, max_items: int) -> List[MessageStreamMessage]:
        queue = self.queued.setdefault(name, [])
        batch, self.queued[name] = queue[:max_items], queue[max_items:]
        if batch:
            self.cursors[name] = batch[-1].position
        return batch

    def cursor_report(self) -> List[Dict[str, Any]]:
        """``message_stream_cursors`` for the completion body, by stream name."""
        return [{"stream_name": name, "through_position": position} for name, position in sorted(self.cursors.items())]

    def wait_report(self) -> List[Dict[str, Any]]:
        """``message_stream_waits`` for the completion body, by stream name."""
        return [{"stream_name": name, "after_position": position} for name, position in sorted(self.waits.items())]


class MessageStream:
    """Replay-safe receiver for one named stream; use its generators with ``yield from``."""

    def __init__(self, inbox: StreamInbox, name: str) -> None:
        self._inbox = inbox
        self.name = validate_stream_name(name)

    def receive(self, max_items: int = 1) -> Generator[Any, Any, List[MessageStreamMessage]]:
        """Wait until at least one message is queued, then take up to ``max_items`` (1..100) of them."""
        if isinstance(max_items, bool) or not isinstance(max_items, int) or not 1 <= max_items <= MAX_BATCH:
            raise ValueError(f"max_items must be between 1 and {MAX_BATCH}")
        inbox, name = self._inbox, self.name
        while not inbox.has_pending(name):
            cursor = inbox.cursor(name)
            inbox.waits[name] = cursor
            yield WaitCondition(
                predicate=lambda: inbox.has_pending(name),
                condition_key=f"message-stream:{name}:{cursor}",
                condition_definition_fingerprint=sdk_stream_wait_fingerprint(),
            )
        inbox.waits.pop(name, None)
        return inbox.take(name, max_items)

    def receive_one(self) -> Generator[Any, Any, MessageStreamMessage]:
        """Wait for and take the next message."""
        batch = yield from self.receive(1)
        return batch[0]


def _sdk_predicate_shape(self: Any) -> Callable[[], Any]:
    # Never called to evaluate anything: this lambda only reproduces the identity (module,
    # qualname, code) of the published SDK's stream-wait predicate, so the fingerprint we send
    # is the one its worker records and checks on replay (the attribute names are that code's).
    return lambda: self._context._message_stream_pending(self.name)


@functools.cache
def sdk_stream_wait_fingerprint() -> str:
    """``condition_definition_fingerprint`` of a stream wait, equal to the published SDK's."""
    from .fingerprints import condition_fingerprint

    shape = _sdk_predicate_shape(None)
    shape.__module__ = "durable_workflow.workflow"
    shape.__qualname__ = "MessageStream.receive.<locals>.<lambda>"
    return condition_fingerprint(shape)
