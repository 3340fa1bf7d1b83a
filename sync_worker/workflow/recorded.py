"""The replay driver's recorded mode: messages applied where their record says (``messages``).

Mixed into ``replayer._Replay`` next to the legacy ``waiting.ConditionWaits``. The queue
``receivers`` holds the recorded messages in application order, then the message the current
task carries. A message is *due* at a yield once the workflow has consumed the results
recorded before it arrived (``result_index``) and the yield is at or past the step it waits
for (``due_sequence``). The queue is drained from its head only, so messages are applied
exactly once and in order.

Hooks, as the workflow yields:

* before any yield, the messages due *before* the next recorded step (strictly) — the point a
  wait that is true at once, or a version marker on its old path, occupies;
* before a yield consumes a recorded step (a result, a parallel group, a side effect...), the
  messages due *at* it; before a pending step or a new command, every due message;
* at a condition wait (:meth:`RecordedWaits.wait_in_order`): the predicate is evaluated first
  (true: the wait was true at once and recorded nothing, whatever open comes next); false: the
  wait is the next recorded ``ConditionWaitOpened``; the messages due at its sequence are
  applied and the predicate decides again: true resolves it, false with a recorded timeout
  resolves ``False``, false with another recorded open next is the server's re-open of this
  same wait (nothing else ran in between), false with nothing recorded re-opens it.

The wait's recorded terminal events and its fingerprint are not what decides: the predicate
over the same applied messages is. A fingerprint that differs only logs (``fingerprints``).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import NonDeterministicReplayError
from .commands import Command, WaitCondition
from .failures import fail_workflow_from_exception
from .fingerprints import note_fingerprint
from .history import HistoryIndex, Receiver, RecordedStep
from .waiting import Action, Stop

__all__ = ["RecordedWaits", "UpdateCall"]

#: "Past every recorded step" (a pending step's yield, or a new command).
LIVE = math.inf


class UpdateCall:
    """The update an update task runs: applied in the queue at its point, outcome kept here."""

    def __init__(self, update_id: str, name: str, args: List[Any]) -> None:
        self.update_id, self.name, self.args = update_id, name, args
        self.applied = False
        self.result: Any = None
        self.error: Optional[BaseException] = None


class RecordedWaits:
    """Recorded-mode message hooks and condition waits (see the module docstring)."""

    history: HistoryIndex
    receivers: List[Receiver]
    pending: List[Command]
    cursor: int
    wait_cursor: int
    selection_cursor: int
    update_call: Optional[UpdateCall]
    #: the wait a task ended live on: (command, position of the recorded open it stopped at)
    live_wait: Optional[Tuple[WaitCondition, int]]
    _warned_fingerprints: Dict[str, bool]

    def apply(self, receiver: Receiver) -> None:
        raise NotImplementedError

    def go_live(self) -> None:
        raise NotImplementedError

    def check_new(self, command: Any, offset: int = 0) -> None:
        raise NotImplementedError

    def next_unconsumed(self) -> Optional[RecordedStep]:
        raise NotImplementedError

    def evaluate(self, command: WaitCondition) -> bool:
        raise NotImplementedError

    # -- the queue ------------------------------------------------------------------------

    def apply_messages(self, limit: float, *, inclusive: bool) -> int:
        """Apply the head messages due at a yield whose step has sequence ``limit``."""
        applied = 0
        while self.receivers:
            head = self.receivers[0]
            if head.result_index > self.cursor or head.selection_index > self.selection_cursor:
                break
            if not (head.due_sequence < limit or (inclusive and head.due_sequence <= limit)):
                break
            self.receivers.pop(0)
            self.apply(head)
            applied += 1
        return applied

    def apply_before_yield(self) -> None:
        step = self.next_unconsumed()
        self.apply_messages(step.sequence if step is not None else LIVE, inclusive=False)

    def apply_at_step(self, sequence: Optional[float]) -> None:
        self.apply_messages(LIVE if sequence is None else sequence, inclusive=True)

    def call_update(self, handler: Callable[..., Any], receiver: Receiver) -> None:
        """Run the update task's own handler: its return value or exception is the outcome."""
        call = self.update_call
        assert call is not None
        call.applied = True
        try:
            call.result = handler(*receiver.args)
        except Exception as error:  # the update fails; the workflow goes on
            call.error = error

    # -- condition waits ------------------------------------------------------------------

    def wait_in_order(self, command: WaitCondition) -> Action:
        try:
            if self.evaluate(command):
                return ("send", True)  # true at once: it recorded nothing
        except Exception as error:
            return Stop([fail_workflow_from_exception(error, prefix="wait_condition predicate raised")])
        return self._next_open(command)

    def _next_open(self, command: WaitCondition) -> Action:
        history = self.history
        while True:
            step = self.next_unconsumed()
            position = self.wait_cursor
            if step is None or position >= len(history.wait_steps) or history.wait_steps[position] is not step:
                # Nothing recorded for this wait: it opens now (every due message was applied
                # before this yield, which is past every recorded step).
                self.go_live()
                self.check_new(command)
                self.pending.append(command)
                return Stop()
            self._check_open(history.waits[position], step, command)
            self.wait_cursor += 1
            outcome = self._decide(command, position)
            if outcome is not None:
                return outcome

    def _decide(self, command: WaitCondition, position: int) -> Optional[Action]:
        """At recorded open ``position``: apply what is due there and decide (None: a re-open follows)."""
        history = self.history
        step = history.wait_steps[position]
        self.apply_messages(step.sequence, inclusive=True)
        try:
            if self.evaluate(command):
                return ("send", True)
        except Exception as error:
            return Stop([fail_workflow_from_exception(error, prefix="wait_condition predicate raised")])
        wait_id = history.waits[position].get("condition_wait_id")
        if isinstance(wait_id, str) and history.wait_resolutions.get(wait_id) == "timed_out":
            return ("send", False)
        nxt = self.next_unconsumed()
        if (nxt is not None and self.wait_cursor < len(history.wait_steps)
                and history.wait_steps[self.wait_cursor] is nxt):
            return None  # the server re-opened this wait after input that did not satisfy it
        self.go_live()
        self.pending.append(command)  # still false: re-open it
        self.live_wait = (command, position)
        return Stop()

    def wait_again(self, command: WaitCondition) -> Optional[Action]:
        """Continue a wait the previous task ended on, with the new events (sticky resume)."""
        if self.live_wait is None or self.live_wait[0] is not command:
            return None
        position = self.live_wait[1]
        self.live_wait = None
        outcome = self._decide(command, position)
        return outcome if outcome is not None else self._next_open(command)

    def _check_open(self, opened: Dict[str, Any], step: RecordedStep, command: WaitCondition) -> None:
        key = opened.get("condition_key")
        if isinstance(key, str) and key != (command.condition_key or ""):
            raise NonDeterministicReplayError(step.sequence, "condition wait", step.event_types, detail=(
                f"condition_key_changed: condition wait {opened.get('condition_wait_id')!r} wait_condition key changed "
                f"during replay: history has {key!r}, workflow yielded {command.condition_key!r}"))
        note_fingerprint(self._warned_fingerprints, opened, step.sequence, command)
