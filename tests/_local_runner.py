"""A local-activity runner for replay tests: each call gets the outcome a full history recorded.

Cold and sticky replays of a history cut must agree byte for byte; at a cut before a local
activity's events the workflow runs it live, so both paths need a runner that answers the same.
:class:`RecordedLocalRunner` answers with what the complete history recorded for that call (by
activity type and arguments, in order), as the worker's runner would have produced it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from sync_worker import payloads
from sync_worker.errors import ActivityFailed
from sync_worker.failure_reports import ObservedText

__all__ = ["RecordedLocalRunner"]

_TERMINAL = {"ActivityCompleted": "completed", "ActivityFailed": "failed", "ActivityTimedOut": "timed_out",
             "ActivityCancelled": "cancelled"}


class RecordedLocalRunner:
    def __init__(self, history: List[Dict[str, Any]]) -> None:
        scheduled: Dict[int, Dict[str, Any]] = {}
        self.outcomes: Dict[Tuple[str, str], List[Tuple[Dict[str, Any], Dict[str, Any]]]] = {}
        for event in history:
            payload = event.get("payload") or {}
            if payload.get("execution_mode") != "local":
                continue
            if event["event_type"] == "ActivityScheduled":
                scheduled[payload["sequence"]] = payload
            elif event["event_type"] in _TERMINAL:
                opened = scheduled[payload["sequence"]]
                args = payloads.decode_envelope(opened["arguments"])
                key = (payload["activity_type"], payloads.encode(args))
                closed = dict(payload, outcome=_TERMINAL[event["event_type"]])
                self.outcomes.setdefault(key, []).append((opened, closed))
        self.taken: Dict[Tuple[str, str], int] = {}

    def begin_replay(self) -> None:
        self.taken = {}

    def run(self, command: Any) -> Any:
        key = (command.activity_type, payloads.encode(list(command.arguments)))
        index = self.taken.get(key, 0)
        self.taken[key] = index + 1
        opened, closed = self.outcomes[key][index]
        command.arguments_envelope = opened["arguments"]
        attempts = [dict(item, message=ObservedText(item["message"])) if "message" in item else dict(item)
                    for item in opened.get("attempts", [])]
        if closed["outcome"] == "completed":
            value = payloads.decode_envelope(closed["result"])
            command.result_envelope = closed["result"]
            command.outcome = {"outcome": "completed", "attempts": attempts}
            command.observed = value
            return value
        command.outcome = {"outcome": closed["outcome"], "message": ObservedText(closed["message"]),
                           "exception_type": closed.get("exception_type"),
                           "non_retryable": bool(closed.get("non_retryable")), "attempts": attempts}
        if closed.get("timeout_kind"):
            command.outcome["timeout_kind"] = closed["timeout_kind"]
        failure = ActivityFailed(closed["message"], activity_type=command.activity_type,
                                 exception_type=closed.get("exception_type"),
                                 non_retryable=bool(closed.get("non_retryable")))
        command.observed = failure
        return failure
