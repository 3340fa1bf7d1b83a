"""Catching a forgotten ``yield``: durable commands built and never yielded.

``ctx.schedule_activity(...)`` (and every other durable call) only *builds* a command; nothing
happens until the workflow yields it. Code that forgets the ``yield`` schedules nothing and
gets a command object where it expected a value, and before this check the run either hung
(the command in the result could not be encoded: a task failure on every attempt) or, with a
plain-function ``run``, completed without ever running the activity.

The context tracks every command it builds (:class:`IssuedCommands`); the replayer marks each one
it is handed. When the workflow finishes, a command still unyielded, or one inside the result,
makes the task fail with :func:`forgotten_yield` naming the call -- a workflow-task failure, so
the run stays open and resumes once the fixed code is deployed.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypeVar

__all__ = ["IssuedCommands", "forgotten_yield"]

C = TypeVar("C")


class IssuedCommands:
    """Commands the context built, until the replayer is handed them (or they are set aside)."""

    def __init__(self) -> None:
        self._pending: Dict[int, Any] = {}

    def track(self, command: C) -> C:
        self._pending[id(command)] = command
        return command

    def release(self, command: Any) -> None:
        """``command`` was yielded (a list: every command in it, nested lists included)."""
        if isinstance(command, (list, tuple)):
            for item in command:
                self.release(item)
            return
        members = getattr(command, "operations", None)  # a selection: its members were yielded with it
        if isinstance(members, tuple):
            for _, member in members:
                self.release(member)
        self._pending.pop(id(command), None)

    def leftovers(self) -> List[Any]:
        return list(self._pending.values())


_TYPES: List[Any] = []  # (ContinueAsNew, every command type): imported at first use (import cycles)


def _types() -> List[Any]:
    if not _TYPES:
        from .commands import STEP_TYPES, ContinueAsNew
        from .select import SelectGroup

        _TYPES.extend((ContinueAsNew, (*STEP_TYPES, ContinueAsNew, SelectGroup)))
    return _TYPES


def _commands_in(value: Any, depth: int = 0) -> List[Any]:
    if value is None:  # (what most runs return)
        return []
    if isinstance(value, _types()[1]):
        return [value]
    if depth > 20:
        return []
    if isinstance(value, dict):
        return [found for item in value.values() for found in _commands_in(item, depth + 1)]
    if isinstance(value, (list, tuple, set)):
        return [found for item in value for found in _commands_in(item, depth + 1)]
    return []


def forgotten_yield(result: Any, leftovers: List[Any], workflow: str) -> Optional[str]:
    """The failure message when the workflow's ``result`` holds a command or commands were never
    yielded; None when everything it built was yielded. A returned ``ctx.continue_as_new(...)`` is
    how a run continues, not a mistake."""
    in_result = [] if isinstance(result, _types()[0]) else _commands_in(result)
    if in_result:
        what = _describe(in_result[0])
        return (f"forgotten_yield: {workflow}.run returned {what} where a value was expected: did you forget "
                f"`yield` before ctx.{_call(in_result[0])}(...)? A durable call only builds a command; "
                "`value = yield ctx....` runs it and gives its result.")
    if leftovers:
        names = ", ".join(sorted({f"ctx.{_call(command)}(...)" for command in leftovers}))
        return (f"forgotten_yield: {workflow}.run finished but never yielded {names}, so it never ran: did you "
                "forget `yield`? run must be a generator that yields each durable call "
                "(`result = yield ctx.schedule_activity(...)`).")
    return None


_CALLS = {"ScheduleActivity": "schedule_activity", "StartTimer": "start_timer", "WaitCondition": "wait_condition",
          "StartChildWorkflow": "start_child_workflow", "RecordSideEffect": "side_effect",
          "RecordVersionMarker": "get_version", "UpsertSearchAttributes": "upsert_search_attributes",
          "UpsertMemo": "upsert_memo", "RecordLocalActivity": "local_activity", "SelectGroup": "select"}


def _call(command: Any) -> str:
    return _CALLS.get(type(command).__name__, type(command).__name__)


def _describe(command: Any) -> str:
    describe = getattr(command, "describe", None)
    return f"a {type(command).__name__} ({describe()})" if callable(describe) else f"a {type(command).__name__}"
