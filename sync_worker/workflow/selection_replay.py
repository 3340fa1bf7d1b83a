"""Selections in replay (mixed into ``replayer._Replay``); the model is in ``select``.

* ``yield ctx.select(...)``: the next ``SelectionResolved`` (markers are consumed in group order)
  is this group's verdict when there is one: its group id, winner key / index / base / size /
  kind, durable identity and resolution event must match what the code yields and what the
  history recorded, and the yield resumes with the :class:`SelectionResult`. Without a verdict,
  a group whose members are already recorded waits (the task ends with nothing new); otherwise
  the members are sent now, as one batch.
* ``yield handle``: a member's value once every leaf of it is terminal (a failure is thrown), a
  cancelled member raises ``DurableOperationCancelled``; else the task ends and waits.
* ``yield handle.cancel()``: a ``cancel_selection_operation`` command unless the history already
  records the cancellation; it resolves ``None`` and the code goes on.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Set

from ..errors import DurableOperationCancelled, NonDeterministicReplayError
from .commands import Command
from .history import HistoryIndex, RecordedStep
from .local_activities import RecordLocalActivity, refuse_local_in_group
from .matching import check_step
from .select import (
    CancelDurableOperation,
    DurableOperationHandle,
    SelectGroup,
    SelectionResult,
    annotate,
    member_kind,
)
from .waiting import Action, Stop

__all__ = ["Selections"]


class Selections:
    """The selection part of the replay driver (see the module docstring)."""

    history: HistoryIndex
    pending: List[Command]
    recorded: bool
    #: markers consumed, sequences of selections consumed, handles this replay authored
    selection_cursor: int
    consumed_selections: Set[int]
    authored_handles: Dict[int, DurableOperationHandle]

    def go_live(self) -> None:
        raise NotImplementedError

    def unconsumed(self) -> List[RecordedStep]:
        raise NotImplementedError

    def apply_at_step(self, sequence: Optional[float]) -> None:
        raise NotImplementedError

    # -- the group ------------------------------------------------------------------------

    def _selection_base(self, marker: Optional[Dict[str, Any]]) -> int:
        if marker is not None:
            base = marker.get("selection_group_base_sequence")
            if type(base) is not int or base < 1:
                raise NonDeterministicReplayError(0, "SelectionResolved with a positive group base sequence",
                                                  ["SelectionResolved"])
            return base
        steps = self.unconsumed()
        if steps:
            return steps[0].sequence
        open_members = [s for s in self.history.selection.steps if s not in self.consumed_selections]
        if open_members:
            return min(open_members)
        return self.history.max_sequence() + len(self.pending) + 1

    def select(self, group: SelectGroup) -> Action:
        selection = self.history.selection
        marker = selection.markers[self.selection_cursor] if self.selection_cursor < len(selection.markers) else None
        base = self._selection_base(marker)
        leaves, handles, shapes, _ = annotate(group, base)
        for leaf in leaves:
            if isinstance(leaf, RecordLocalActivity):
                leaf.check_admissible()
        refuse_local_in_group(leaves)
        group_id = f"select-calls:{base}:{len(leaves)}"
        if marker is not None and marker.get("selection_group_id") != group_id:
            raise NonDeterministicReplayError(base, group_id, ["SelectionResolved"],
                                              detail=f"history selected group {marker.get('selection_group_id')!r}")
        recorded_members = False
        for sequence, leaf in zip(range(base, base + len(leaves)), leaves):
            steps = selection.steps.get(sequence, [])
            if marker is not None and not steps:
                raise NonDeterministicReplayError(sequence, f"durable {member_kind(leaf)} selection member opening "
                                                  "history", ["SelectionResolved"],
                                                  detail="selection member is missing scheduled/open history")
            for step in steps:
                check_step(leaf, step)
            if steps:
                selection.identity(member_kind(leaf), sequence, 1)
                recorded_members = True
        if marker is not None or recorded_members:
            handles = {key: dataclasses.replace(handle, identity=selection.identity(handle.kind, handle.base_sequence,
                                                                                    handle.size))
                       if handle.kind == "group" or (marker is not None) else handle
                       for key, handle in handles.items()}
        for handle in handles.values():
            self.authored_handles[id(handle)] = handle
        self._check_cancellations(handles)
        if marker is None:
            if recorded_members:
                return Stop()  # started in an earlier task: the server's verdict has not come yet
            self.go_live()
            if self.recorded:
                self.apply_at_step(None)
            self.pending.extend(leaves)
            return Stop()
        self.selection_cursor += 1
        self.consumed_selections.update(range(base, base + len(leaves)))
        if self.recorded:
            self.apply_at_step(base + len(leaves) - 1)
        return ("send", self._verdict(marker, handles, shapes, base, len(leaves)))

    def _verdict(self, marker: Dict[str, Any], handles: Dict[Any, DurableOperationHandle],
                 shapes: Dict[Any, Optional[List[Any]]], base: int, size: int) -> SelectionResult:
        selection = self.history.selection
        key = marker.get("member_key")
        winner = handles.get(key) if isinstance(key, (str, int)) and not isinstance(key, bool) else None
        if winner is None:
            raise NonDeterministicReplayError(_int(marker.get("member_base_sequence")), "SelectionResolved with a "
                                              "declared member key, index, base, and size", ["SelectionResolved"])
        expected = {"selection_group_id": winner.selection_group_id, "selection_group_base_sequence": base,
                    "selection_group_size": size, "member_key": winner.key, "member_index": winner.index,
                    "member_base_sequence": winner.base_sequence, "member_size": winner.size,
                    "operation_kind": winner.kind, "operation_identity": winner.identity}
        for name, value in expected.items():
            if marker.get(name) != value:
                raise NonDeterministicReplayError(winner.base_sequence, "SelectionResolved matching the authored "
                                                  "member and durable identity", ["SelectionResolved"],
                                                  detail=f"winner field {name} does not match workflow code/history")
        outcome = marker.get("outcome")
        if outcome not in ("completed", "failed"):
            raise NonDeterministicReplayError(winner.base_sequence, "SelectionResolved outcome completed or failed",
                                              ["SelectionResolved"])
        resolved_at = selection.resolution(marker, winner)
        resolved, value, failure = selection.member_value(winner.base_sequence, winner.size, shapes[winner.key],
                                                          outcome=str(outcome), resolved_at=resolved_at)
        if outcome == "completed" and failure is not None:
            raise NonDeterministicReplayError(winner.base_sequence, "completed SelectionResolved with a fully "
                                              "successful durable member", ["SelectionResolved"],
                                              detail="the completed winner contains a failed durable leaf")
        if not resolved:
            raise NonDeterministicReplayError(winner.base_sequence, "a resolved selection winner",
                                              ["SelectionResolved"],
                                              detail="the committed winner has no terminal member history")
        return SelectionResult(winner.key, winner.index, winner.kind, winner.identity, value, failure, winner,
                               dict(handles))

    def _check_cancellations(self, handles: Dict[Any, DurableOperationHandle]) -> None:
        if not handles:
            return
        group_id = next(iter(handles.values())).selection_group_id
        by_base = {handle.base_sequence: handle for handle in handles.values()}
        for (recorded_group, member_base), _ in self.history.selection.cancellations.items():
            if recorded_group != group_id:
                continue
            handle = by_base.get(member_base)
            if handle is None:
                raise NonDeterministicReplayError(member_base, "SelectionOperationCancelled matching an authored "
                                                  "selection handle", ["SelectionOperationCancelled"],
                                                  detail="cancellation member base does not name an authored member")
            self.recorded_cancellation(handle)

    def recorded_cancellation(self, handle: DurableOperationHandle) -> Optional[Dict[str, Any]]:
        payload = self.history.selection.cancellations.get((handle.selection_group_id, handle.base_sequence))
        if payload is None:
            return None
        expected = {"selection_group_id": handle.selection_group_id, "member_key": handle.key,
                    "member_index": handle.index, "member_base_sequence": handle.base_sequence,
                    "member_size": handle.size, "operation_kind": handle.kind, "operation_identity": handle.identity}
        for name, value in expected.items():
            if payload.get(name) != value:
                raise NonDeterministicReplayError(handle.base_sequence, "SelectionOperationCancelled matching the "
                                                  "authored selection handle", ["SelectionOperationCancelled"],
                                                  detail=f"cancellation field {name} does not match the durable member")
        return payload

    # -- handles ---------------------------------------------------------------------------

    def _authored(self, handle: DurableOperationHandle) -> None:
        if self.authored_handles.get(id(handle)) is not handle:
            raise ValueError("durable operation handle was not authored by the current workflow replay")

    def await_member(self, handle: DurableOperationHandle) -> Action:
        self._authored(handle)
        if self.recorded_cancellation(handle) is not None:
            return ("throw", DurableOperationCancelled(handle.selection_group_id, handle.key, handle.index,
                                                       handle.kind, handle.identity))
        shape = None
        if isinstance(handle.operation, list):
            from .matching import annotate_group

            _, shape = annotate_group(handle.operation, handle.base_sequence)
        resolved, value, failure = self.history.selection.member_value(handle.base_sequence, handle.size, shape)
        if not resolved:
            self.go_live()
            return Stop()
        return ("throw", failure) if failure is not None else ("send", value)

    def cancel_member(self, command: CancelDurableOperation) -> Action:
        self._authored(command.handle)
        if self.recorded_cancellation(command.handle) is None:
            self.go_live()
            self.pending.append(command)
        return ("send", None)

    def unconsumed_selections(self) -> List[int]:
        steps = self.history.selection.steps
        if not steps:  # (a run without selections)
            return []
        return sorted(s for s in steps if s not in self.consumed_selections)


def _int(value: Any) -> int:
    return value if type(value) is int else 0
