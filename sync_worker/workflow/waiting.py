"""Condition waits in replay (``wait_condition``, and ``message_stream().receive`` under it).

The Nth ``wait_condition`` yield that is not already true meets the Nth recorded
``ConditionWaitOpened``; its receivers are applied, then the predicate decides: still false
with a recorded re-open of the same wait (same key or predicate fingerprint) moves on to the
re-open, true (or recorded satisfied) resolves ``True``, a recorded timeout resolves
``False``, and still false with nothing more recorded re-opens the wait (the task ends).

Every decision that read the history is logged as a :class:`WaitVisit` (one per recorded
open consumed, ``wait_visits[i]`` for open ``i``), and every wait that was true at once
while no recorded open was left is kept in ``unrecorded_true``. The sticky cache
(``incremental``) re-asks those questions when it feeds a suspended run new events: a cold
replay of the longer history takes the same decisions only if the answers are unchanged.
Predicates must be side-effect free (as the published SDK requires): a resumed run may
evaluate one more time than a cold replay does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Set, Tuple, Union

from ..errors import NonDeterministicReplayError
from .commands import Command, WaitCondition
from .failures import fail_workflow_from_exception
from .fingerprints import note_fingerprint
from .history import HistoryIndex, Receiver, RecordedStep
from .matching import check_step

__all__ = ["ConditionWaits", "WaitVisit", "decide"]


class Stop:
    """End of this task: ``commands`` are final (the collected ones, unless replaced)."""

    def __init__(self, commands: Optional[List[Command]] = None) -> None:
        self.commands = commands


Action = Union[Tuple[str, Any], Stop]


def decide(resolution: Optional[str], has_reopen: bool, satisfied: Optional[bool],
           reopened: bool) -> Tuple[str, bool]:
    """A recorded wait's outcome: ``(false|reopen|true|live, leaves a trailing wait)``."""
    if resolution == "timed_out":
        return "false", False
    if has_reopen and not satisfied:
        return "reopen", False
    if satisfied or resolution == "satisfied":
        return "true", has_reopen and reopened
    return "live", False


@dataclass
class WaitVisit:
    """What one recorded open's decision read from the history (see the module docstring)."""

    position: int
    wait_id: Optional[str]
    command: WaitCondition
    resolution: Optional[str]
    terminal: Optional[int]
    has_reopen: bool
    reopened: bool
    popped: int
    left_after: int
    satisfied: Optional[bool] = None
    decision: str = "false"
    trailing: bool = False
    epoch: int = 0  # which assignment of ``trailing_wait`` this decision made


class ConditionWaits:
    """The condition-wait part of the replay driver (mixed into ``replayer._Replay``)."""

    history: HistoryIndex
    receivers: List[Receiver]
    pending: List[Command]
    wait_cursor: int
    trailing_wait: Optional[WaitCondition]
    trailing_epoch: int
    wait_visits: List[WaitVisit]
    visits_by_id: Dict[str, List[int]]
    unrecorded_true: List[Tuple[int, WaitCondition]]
    _warned_fingerprints: Dict[str, bool]

    def go_live(self) -> None:
        raise NotImplementedError

    def check_new(self, command: Any, offset: int = 0) -> None:
        raise NotImplementedError

    def apply_for_wait(self, wait_id: Optional[str]) -> None:
        raise NotImplementedError

    def wait_mismatch(self, opened: Dict[str, Any], step: RecordedStep, command: WaitCondition) -> Optional[
            NonDeterministicReplayError]:
        identity = f"condition wait {opened.get('condition_wait_id')!r}"
        key = opened.get("condition_key")
        if isinstance(key, str) and key != (command.condition_key or ""):
            return NonDeterministicReplayError(step.sequence, "condition wait", step.event_types, detail=(
                f"condition_key_changed: {identity} wait_condition key changed during replay: history has "
                f"{key!r}, workflow yielded {command.condition_key!r}"))
        # A different fingerprint is not an error (``fingerprints``): it is logged where the
        # wait is consumed, and only equal fingerprints make two opens the same logical wait.
        return None

    def same_wait(self, position: int, command: WaitCondition) -> bool:
        """Whether recorded open ``position`` is a re-open of the same logical wait."""
        if position >= len(self.history.waits):
            return False
        opened, step = self.history.waits[position], self.history.wait_steps[position]
        if self.wait_mismatch(opened, step, command) is not None:
            return False
        key, fingerprint = opened.get("condition_key"), opened.get("condition_definition_fingerprint")
        same_key = isinstance(key, str) and bool(key) and key == (command.condition_key or "")
        return same_key or (isinstance(fingerprint, str) and bool(fingerprint)
                            and fingerprint == command.condition_definition_fingerprint)

    def set_trailing(self, command: Optional[WaitCondition]) -> int:
        """Set the wait ``finish`` skips trailing re-opens of; returns the assignment's number."""
        self.trailing_wait = command
        self.trailing_epoch += 1
        return self.trailing_epoch

    def evaluate(self, command: WaitCondition) -> bool:
        return bool(command.predicate())

    def wait(self, command: WaitCondition) -> Action:
        history = self.history
        mismatch = None
        if self.wait_cursor < len(history.waits):
            mismatch = self.wait_mismatch(history.waits[self.wait_cursor], history.wait_steps[self.wait_cursor],
                                          command)
        if self.wait_cursor >= len(history.waits) or mismatch is not None:
            # Nothing recorded for this wait: a predicate that is already true records nothing.
            try:
                if self.evaluate(command):
                    self.set_trailing(None)
                    if mismatch is None:
                        self.unrecorded_true.append((self.wait_cursor, command))
                    return ("send", True)
            except Exception as error:
                return Stop([fail_workflow_from_exception(error, prefix="wait_condition predicate raised")])
            if mismatch is not None:
                raise mismatch
            self.go_live()
            self.check_new(command)
            self.pending.append(command)
            return Stop()
        return self.wait_recorded(command, reopened=False)

    def wait_recorded(self, command: WaitCondition, *, reopened: bool) -> Action:
        """Consume recorded opens from ``wait_cursor`` on (``reopened``: reached through a re-open)."""
        history = self.history
        while True:
            position = self.wait_cursor
            opened, step = history.waits[position], history.wait_steps[position]
            check_step(command, step)
            mismatch = self.wait_mismatch(opened, step, command)
            if mismatch is not None:
                raise mismatch
            note_fingerprint(self._warned_fingerprints, opened, step.sequence, command)
            raw_id = opened.get("condition_wait_id")
            wait_id = raw_id if isinstance(raw_id, str) else None
            resolution = history.wait_resolutions.get(wait_id) if wait_id is not None else None
            terminal = history.wait_terminal_index.get(wait_id) if wait_id is not None else None
            before = len(self.receivers)
            self.apply_for_wait(wait_id)
            visit = WaitVisit(position, wait_id, command, resolution, terminal, self.same_wait(position + 1, command),
                              reopened, before - len(self.receivers), len(self.receivers))
            if resolution != "timed_out":
                try:
                    visit.satisfied = self.evaluate(command)
                except Exception as error:
                    return Stop([fail_workflow_from_exception(error, prefix="wait_condition predicate raised")])
            visit.decision, visit.trailing = decide(resolution, visit.has_reopen, visit.satisfied, reopened)
            self.wait_visits.append(visit)
            if wait_id is not None:
                self.visits_by_id.setdefault(wait_id, []).append(position)
            self.wait_cursor += 1
            if visit.decision == "reopen":
                # The server re-opened this wait after input that did not satisfy it.
                reopened = True
                continue
            if visit.decision == "false":
                visit.epoch = self.set_trailing(None)
                return ("send", False)
            if visit.decision == "true":
                visit.epoch = self.set_trailing(command if visit.trailing else None)
                return ("send", True)
            self.go_live()
            self.pending.append(command)  # still false: re-open the wait
            return Stop()

    def rewait(self, command: WaitCondition) -> Optional[Action]:
        """Take the last recorded open's decision again (the sticky cache resumes a wait that
        ended the previous task by re-opening); None when the log does not allow it."""
        last = self.wait_visits[-1] if self.wait_visits else None
        if last is None or last.decision != "live" or last.command is not command:
            return None
        visit = self.wait_visits.pop()
        if visit.position != len(self.wait_visits) or visit.left_after:
            return None
        if visit.wait_id is not None:
            self.visits_by_id[visit.wait_id].pop()
        if visit.popped and self.history.wait_terminal_index.get(visit.wait_id or "") is None:
            # A cold replay applies what this open already took plus the bound receivers right
            # after it; applying only the new ones is the same only when they come first.
            first = next((index for index, receiver in enumerate(self.receivers) if receiver.wait_id == visit.wait_id),
                         None)
            if first not in (None, 0):
                return None
        self.wait_cursor = visit.position
        return self.wait_recorded(command, reopened=visit.reopened)

    def waits_still_hold(self, old_count: int, new_receivers: List[Receiver], touched: Set[str]) -> bool:
        """Whether every logged wait decision reads the same from the extended history."""
        history = self.history
        count = len(history.waits)
        kept: List[Tuple[int, WaitCondition]] = []
        for position, command in self.unrecorded_true:
            if position >= count:
                kept.append((position, command))
            elif self.wait_mismatch(history.waits[position], history.wait_steps[position], command) is None:
                return False  # a cold replay would now match this wait with a recorded open
        self.unrecorded_true = kept
        positions: Set[int] = set()
        for wait_id in touched:
            positions.update(self.visits_by_id.get(wait_id, ()))
        if count > old_count and old_count:
            positions.add(old_count - 1)
        bound = {receiver.wait_id for receiver in new_receivers if receiver.wait_id is not None}
        for position in sorted(positions):
            if position >= len(self.wait_visits):
                continue
            visit = self.wait_visits[position]
            if visit.wait_id in bound:
                return False  # new input for a wait the code already passed
            wait_id = visit.wait_id or ""
            terminal = history.wait_terminal_index.get(wait_id)
            if terminal != visit.terminal and terminal is not None and (
                    visit.left_after or any(receiver.history_index < terminal for receiver in new_receivers)):
                return False
            resolution = history.wait_resolutions.get(wait_id) if visit.wait_id is not None else None
            if resolution != "timed_out" and visit.satisfied is None:
                return False
            has_reopen = self.same_wait(position + 1, visit.command)
            decision, trailing = decide(resolution, has_reopen, visit.satisfied, visit.reopened)
            if decision != visit.decision:
                return False
            if trailing != visit.trailing:
                # Only what ``finish`` will skip changes; it matters if no later wait overwrote it.
                visit.trailing = trailing
                if visit.epoch == self.trailing_epoch:
                    self.trailing_wait = visit.command if trailing else None
        return True

    def skip_trailing_reopens(self) -> None:
        command = self.trailing_wait
        if command is None:
            return
        while self.wait_cursor < len(self.history.waits) and self.same_wait(self.wait_cursor, command):
            wait_id = self.history.waits[self.wait_cursor].get("condition_wait_id")
            if not isinstance(wait_id, str) or wait_id in self.history.wait_resolutions or any(
                    receiver.wait_id == wait_id for receiver in self.receivers):
                return
            self.wait_cursor += 1
