"""``Replayer``: check workflow code against recorded histories (pure: no I/O).

``Replayer(workflows=[...]).replay(history)`` is the published SDK's ``workflow.Replayer``:
the workflow type and start input come from the history (its ``WorkflowStarted`` event) unless
given, and a mismatch raises ``NonDeterministicReplayError``. :meth:`Replayer.check` and
:meth:`Replayer.check_all` never raise for a history: each gives a :class:`HistoryCheck`
(replayed, non-deterministic, failed or skipped) with the diverging event and the position in
the workflow code, and :class:`ReplayReport` sums them up for CI (``sync-worker replay``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .. import payloads
from ..errors import CodePosition, NonDeterministicReplayError
from .registry import WorkflowRegistry
from .replayer import ReplayResult, replay

__all__ = ["HistoryCheck", "ReplayReport", "Replayer", "history_events", "history_metadata", "recorded_start_input"]

History = Union[Iterable[Dict[str, Any]], Mapping[str, Any]]

REPLAYED, NONDETERMINISTIC, FAILED, SKIPPED = "replayed", "nondeterministic", "failed", "skipped"


def history_events(history: History) -> List[Dict[str, Any]]:
    """The event list of a history: a list, or a mapping with ``events`` / ``history_events`` / ``history``."""
    raw: Any = history
    if isinstance(history, Mapping):
        for key in ("events", "history_events", "history"):
            if key in history:
                raw = history[key]
                break
        else:
            raise ValueError("history export must contain an events, history_events, or history list")
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Iterable):
        raise ValueError("history events must be a list of dictionaries")
    events: List[Dict[str, Any]] = []
    for event in raw:
        if not isinstance(event, Mapping):
            raise ValueError("history events must be dictionaries")
        events.append(dict(event))
    return events


def history_metadata(history: History, events: Sequence[Dict[str, Any]]) -> Dict[str, Optional[str]]:
    """``workflow_type``, ``workflow_id``, ``run_id`` from an export's ``workflow`` block or the events."""
    found: Dict[str, Optional[str]] = {"workflow_type": None, "workflow_id": None, "run_id": None}
    block = history.get("workflow") if isinstance(history, Mapping) else None
    if isinstance(block, Mapping):
        found["workflow_type"] = _text(block.get("workflow_type"))
        found["workflow_id"] = _text(block.get("instance_id") or block.get("workflow_id"))
        found["run_id"] = _text(block.get("run_id"))
    if isinstance(history, Mapping):
        found["workflow_id"] = found["workflow_id"] or _text(history.get("workflow_id"))
        found["run_id"] = found["run_id"] or _text(history.get("run_id"))
    for event in events:
        payload = event.get("payload") if isinstance(event.get("payload"), Mapping) else {}
        assert isinstance(payload, Mapping)
        found["workflow_type"] = found["workflow_type"] or _text(payload.get("workflow_type") or
                                                                 event.get("workflow_type"))
        if event.get("event_type") == "WorkflowStarted":
            found["workflow_id"] = found["workflow_id"] or _text(payload.get("workflow_id"))
            found["run_id"] = found["run_id"] or _text(payload.get("workflow_run_id") or payload.get("run_id"))
    return found


def recorded_start_input(events: Sequence[Dict[str, Any]], payload_codec: Optional[str]) -> List[Any]:
    """The run's arguments, from its ``WorkflowStarted`` event (``[]`` without one)."""
    for event in events:
        if event.get("event_type") != "WorkflowStarted":
            continue
        payload = event.get("payload")
        if not isinstance(payload, Mapping):
            return []
        codec = payload.get("payload_codec") or payload_codec or payloads.CODEC
        for key in ("input_envelope", "input", "arguments"):
            if payload.get(key) is not None:
                return payloads.decode_arguments(payload[key], codec=str(codec))
        return []
    return []


def _text(value: Any) -> Optional[str]:
    return str(value) if value is not None and value != "" else None


@dataclass
class HistoryCheck:
    """The outcome of replaying one history.

    ``status`` is ``replayed``, ``nondeterministic`` (the code no longer matches: ``error``,
    ``event_index`` / ``event`` — the recorded event it diverged at — and ``code_position``),
    ``failed`` (the history could not be replayed at all: unreadable, unsupported, bad input)
    or ``skipped`` (no registered workflow for its type).
    """

    source: str
    status: str
    workflow_type: Optional[str] = None
    workflow_id: Optional[str] = None
    run_id: Optional[str] = None
    message: Optional[str] = None
    error: Optional[BaseException] = None
    event_index: Optional[int] = None
    event: Optional[Dict[str, Any]] = None
    code_position: Optional[CodePosition] = None
    result: Optional[ReplayResult] = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.status in (REPLAYED, SKIPPED)

    @property
    def event_number(self) -> Optional[int]:
        """The diverging event's number in the history (its ``sequence``, else its 1-based position)."""
        if self.event is None or self.event_index is None:
            return None
        number = self.event.get("sequence")
        return number if isinstance(number, int) and not isinstance(number, bool) else self.event_index + 1

    def describe(self) -> str:
        """One or a few lines for a terminal."""
        name = f"{self.source} ({self.workflow_type or 'unknown type'})"
        if self.status == REPLAYED:
            return f"ok       {name}"
        if self.status == SKIPPED:
            return f"skipped  {name}: {self.message}"
        lines = [f"{'NONDET' if self.status == NONDETERMINISTIC else 'FAILED':<8} {name}: {self.message}"]
        if self.event is not None:
            lines.append(f"         at history event {self.event_number}: {self.event.get('event_type')} "
                         f"(workflow sequence {(self.event.get('payload') or {}).get('sequence')})")
        if self.code_position is not None:
            lines.append(f"         workflow code: {self.code_position}")
        return "\n".join(lines)

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"source": self.source, "status": self.status, "workflow_type": self.workflow_type,
                               "workflow_id": self.workflow_id, "run_id": self.run_id, "message": self.message}
        if isinstance(self.error, NonDeterministicReplayError):
            out.update({"workflow_sequence": self.error.workflow_sequence,
                        "expected": self.error.expected_shape,
                        "recorded_event_types": list(self.error.recorded_event_types)})
        if self.event is not None:
            out["event_index"] = self.event_index
            out["event_number"] = self.event_number
            out["event_type"] = self.event.get("event_type")
        if self.code_position is not None:
            position = self.code_position
            out["code_position"] = {"filename": position.filename, "lineno": position.lineno,
                                    "function": position.function, "after_return": position.after}
        return out


@dataclass
class ReplayReport:
    """Every history's :class:`HistoryCheck`; ``ok`` when none is non-deterministic or failed."""

    checks: List[HistoryCheck] = field(default_factory=list)

    def _with(self, status: str) -> List[HistoryCheck]:
        return [check for check in self.checks if check.status == status]

    @property
    def replayed(self) -> List[HistoryCheck]:
        return self._with(REPLAYED)

    @property
    def nondeterministic(self) -> List[HistoryCheck]:
        return self._with(NONDETERMINISTIC)

    @property
    def failed(self) -> List[HistoryCheck]:
        return self._with(FAILED)

    @property
    def skipped(self) -> List[HistoryCheck]:
        return self._with(SKIPPED)

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def summary(self) -> str:
        return (f"{len(self.checks)} histories: {len(self.replayed)} replayed, {len(self.nondeterministic)} "
                f"non-deterministic, {len(self.failed)} failed, {len(self.skipped)} skipped")

    def to_dict(self) -> Dict[str, Any]:
        return {"ok": self.ok, "summary": self.summary(), "histories": [check.to_dict() for check in self.checks]}


class Replayer:
    """Replays histories against a set of workflow classes (one per workflow type)."""

    def __init__(self, *, workflows: Iterable[type], external_storage: Any = None,
                 external_storage_cache: Any = None) -> None:
        """``external_storage``: the driver that reads payloads recorded as references (docs/external-storage.md)."""
        self._registry = WorkflowRegistry(workflows)
        if not self._registry.names():
            raise ValueError("Replayer requires at least one workflow class")
        self.external_storage = external_storage
        self.external_storage_cache = external_storage_cache

    def _events(self, history: History) -> List[Dict[str, Any]]:
        events = history_events(history)
        if self.external_storage is None:
            return events  # a reference then fails where it is decoded, naming the missing driver
        from ..external_storage.wire import resolve_references

        resolved: List[Dict[str, Any]] = resolve_references(events, self.external_storage,
                                                            self.external_storage_cache)
        return resolved

    @property
    def workflow_types(self) -> List[str]:
        return sorted(self._registry.names())

    def replay(self, history: History, start_input: Optional[List[Any]] = None, *,
               workflow_type: Optional[str] = None, workflow_id: Optional[str] = None, run_id: str = "",
               payload_codec: Optional[str] = None, cancel_requested: bool = False) -> ReplayResult:
        """Replay one history (list or export); raises ``NonDeterministicReplayError`` on a mismatch."""
        events = self._events(history)
        meta = history_metadata(history, events)
        cls = self._workflow_cls(workflow_type or meta["workflow_type"])
        arguments = list(start_input) if start_input is not None else recorded_start_input(events, payload_codec)
        return replay(cls, events, arguments, workflow_id=workflow_id, run_id=run_id, payload_codec=payload_codec,
                      cancel_requested=cancel_requested)

    def check(self, history: Union[History, BaseException], *, source: str = "history",
              workflow_type: Optional[str] = None, start_input: Optional[List[Any]] = None) -> HistoryCheck:
        """Replay one history and say how it went (never raises for the history's sake).

        ``history`` may be the exception a loader met reading it: that is a ``failed`` check.
        """
        check = HistoryCheck(source=source, status=FAILED)
        if isinstance(history, BaseException):  # a loader could not read this one
            check.message, check.error = f"{type(history).__name__}: {history}", history
            return check
        try:
            events = history_events(history)
            meta = history_metadata(history, events)
        except (ValueError, TypeError) as error:
            check.message, check.error = str(error), error
            return check
        check.workflow_type = workflow_type or meta["workflow_type"]
        check.workflow_id, check.run_id = meta["workflow_id"], meta["run_id"]
        if check.workflow_type is not None and self._registry.get(check.workflow_type) is None:
            check.status = SKIPPED
            check.message = f"workflow type {check.workflow_type!r} is not registered"
            return check
        try:
            check.result = self.replay(events, start_input, workflow_type=check.workflow_type,
                                       workflow_id=check.workflow_id, run_id=check.run_id or "",
                                       payload_codec="avro")
        except NonDeterministicReplayError as error:
            check.status, check.error, check.message = NONDETERMINISTIC, error, str(error)
            check.code_position = error.code_position
            check.event_index, check.event = _diverging_event(events, error)
            return check
        except Exception as error:  # unreadable payloads, unsupported features, bad arguments...
            check.error, check.message = error, f"{type(error).__name__}: {error}"
            return check
        check.status = REPLAYED
        return check

    def check_all(self, histories: Iterable[Any]) -> ReplayReport:
        """:meth:`check` each history (or ``(source, history)`` pair), in order."""
        report = ReplayReport()
        for index, item in enumerate(histories, start=1):
            if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
                source, history = item
            else:
                source, history = f"history #{index}", item
            report.checks.append(self.check(history, source=source))
        return report

    def _workflow_cls(self, workflow_type: Optional[str]) -> type:
        names = self.workflow_types
        if workflow_type is not None:
            cls = self._registry.get(workflow_type)
            if cls is None:
                raise ValueError(f"workflow type {workflow_type!r} is not registered; registered: {', '.join(names)}")
            return cls
        if len(names) == 1:
            found = self._registry.get(names[0])
            assert found is not None
            return found
        raise ValueError(f"workflow_type is required when multiple workflows are registered: {', '.join(names)}")


def _diverging_event(events: Sequence[Dict[str, Any]],
                     error: NonDeterministicReplayError) -> Tuple[Optional[int], Optional[Dict[str, Any]]]:
    """The first recorded event of the step the replay diverged at (its index in the history)."""
    wanted = set(error.recorded_event_types)
    for index, event in enumerate(events):
        payload = event.get("payload") if isinstance(event.get("payload"), Mapping) else {}
        assert isinstance(payload, Mapping)
        if payload.get("sequence") == error.workflow_sequence and (not wanted or event.get("event_type") in wanted):
            return index, event
    return None, None
