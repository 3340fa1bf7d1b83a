"""Sticky resume == cold replay, byte for byte, at every cut of a history (shared by the tests).

A history is cut at event boundaries. A cold replay of the first ``k`` events gives the
reference; the incremental path starts cold at some prefix and is then fed the rest in
batches, keeping its suspended state, exactly as the worker's sticky cache does. At every
cut its commands (the wire dicts, JSON-encoded) and stream reports must equal the cold ones
-- or it must decline (``None``), after which it starts cold again, like the worker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from sync_worker.workflow import replay
from sync_worker.workflow.incremental import SuspendedRun, resume, start

#: Events that wake a run: a task boundary sits just before each of them.
TASK_EVENTS = ("WorkflowStarted", "ActivityCompleted", "ActivityFailed", "ActivityTimedOut", "TimerFired",
               "ChildRunCompleted", "ChildRunFailed", "SignalReceived", "UpdateApplied", "ConditionWaitSatisfied")


def encoded(result: Any) -> str:
    return json.dumps({"commands": [command.to_wire("q") for command in result.commands],
                       "cursors": result.message_stream_cursors, "waits": result.message_stream_waits},
                      sort_keys=True, default=repr)


#: Makes a fresh local-activity runner for one task (``tests/_local_runner.py``), or None.
LocalFactory = Optional[Callable[[], Any]]


def _runner(local: LocalFactory) -> Any:
    return local() if local is not None else None


def cold(cls: type, events: List[Dict[str, Any]], args: List[Any], codec: Optional[str] = "avro",
         local: LocalFactory = None) -> Optional[str]:
    try:
        return encoded(replay(cls, events, args, workflow_id="wf-sticky", run_id="run-sticky", payload_codec=codec,
                              local_activities=_runner(local)))
    except Exception:
        return None  # a task failure: the sticky path must decline too


def start_state(cls: type, events: List[Dict[str, Any]], args: List[Any],
                codec: Optional[str], local: LocalFactory = None) -> Tuple[Optional[str], Optional[SuspendedRun]]:
    try:
        result, state = start(cls, events, args, workflow_id="wf-sticky", run_id="run-sticky", payload_codec=codec,
                              local_activities=_runner(local))
    except Exception:
        return None, None
    return encoded(result), state


@dataclass
class Walk:
    """What one walk did: cuts resumed, cold starts, and the cuts where a kept state declined."""

    resumed: int = 0
    restarted: int = 0
    declined: List[int] = field(default_factory=list)


def walk(cls: type, args: List[Any], history: List[Dict[str, Any]], codec: Optional[str], cuts: List[int],
         local: LocalFactory = None) -> Walk:
    """Feed ``history`` cut at ``cuts``, checking every cut against a cold replay."""
    state: Optional[SuspendedRun] = None
    out = Walk()
    for cut in cuts:
        expected = cold(cls, history[:cut], args, codec, local)
        if state is not None:
            outcome = resume(state, history[state.event_count:cut], local_activities=_runner(local))
            if outcome is not None:
                result, state = outcome
                assert encoded(result) == expected, f"sticky resume differs from cold replay at event {cut}"
                out.resumed += 1
                continue
            out.declined.append(cut)
        got, state = start_state(cls, history[:cut], args, codec, local)
        assert got == expected
        out.restarted += 1
    return out


def task_boundaries(history: List[Dict[str, Any]]) -> List[int]:
    """Just before each event that wakes the run, and the end (a local activity's outcome is
    recorded by the task that ran it: it wakes nothing)."""
    return sorted({index for index, event in enumerate(history) if index and event.get("event_type")
                   in TASK_EVENTS and (event.get("payload") or {}).get("execution_mode") != "local"}
                  | {len(history)})


def every_cut(cls: type, args: List[Any], history: List[Dict[str, Any]], codec: Optional[str] = "avro",
              local: LocalFactory = None) -> Walk:
    """Every event, every task boundary, and every starting point followed by one resume with
    everything after it; returns the every-event walk (the others are checked the same way).
    ``local`` makes the runner a task's live local activities use (each task gets a fresh one)."""
    every_event = walk(cls, args, history, codec, list(range(1, len(history) + 1)), local)
    walk(cls, args, history, codec, task_boundaries(history), local)
    for first in range(1, len(history)):
        walk(cls, args, history, codec, [first, len(history)], local)
    return every_event
