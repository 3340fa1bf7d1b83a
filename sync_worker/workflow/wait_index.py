"""The two history passes about condition waits that look beyond one event, fed in order.

``read_history`` (``reader``) needs, before its main pass, to know

* which timers are an older server's condition-timeout timers recorded under their own
  sequence (:class:`TimerAliases`), and
* which condition wait each signal/update receiver belongs to (:class:`WaitBinder`).

Both are state machines over the events in history order, so the sticky cache can feed a
suspended run's index only the new events (``incremental``) and get what a cold read of
the whole history gets. A receiver's binding may depend on events recorded *after* it (a
later re-open of its wait takes it over); :meth:`WaitBinder.unsettled` names the receivers
whose binding can still change, so a resume can check that none of them did.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from .history import RESOLVED_EVENTS, Digested, sequence_of, text

__all__ = ["TimerAliases", "WaitBinder", "timeout_kind"]


def timeout_kind(payload: Mapping[str, Any], wait_ids: Mapping[int, str]) -> Optional[str]:
    """``condition_timeout`` / ``signal_timeout`` for the server's internal wait timers, else None."""
    kind = payload.get("timer_kind")
    if kind in ("condition_timeout", "signal_timeout"):
        return str(kind)
    if text(payload.get("condition_wait_id")) is not None:
        return "condition_timeout"
    if text(payload.get("signal_wait_id")) is not None:
        return "signal_timeout"
    sequence = sequence_of(payload)
    if sequence is not None and sequence in wait_ids:
        return "condition_timeout"
    return None


class TimerAliases:
    """Older servers recorded a condition's timeout timer with only its own sequence, a timer
    id and a delay equal to the wait's timeout, right after the open. :meth:`feed` maps those
    sequences to the wait so they are not mistaken for user timers."""

    def __init__(self) -> None:
        self.aliases: Dict[int, str] = {}
        self._active: Optional[Tuple[str, Optional[int], Optional[int]]] = None

    def feed(self, events: List[Digested], wait_ids: Mapping[int, str]) -> Dict[int, str]:
        """Scan ``events`` (``history.digest``); returns the aliases they add."""
        added: Dict[int, str] = {}
        for _, kind, payload, sequence in events:
            if kind == "ConditionWaitOpened":
                wait_id = text(payload.get("condition_wait_id"))
                timeout = payload.get("timeout_seconds")
                if isinstance(timeout, str) and timeout.isdigit():
                    timeout = int(timeout)
                usable = isinstance(timeout, int) and not isinstance(timeout, bool) and timeout > 0
                self._active = (wait_id, sequence, timeout if usable else None) if wait_id else None
            elif kind == "TimerScheduled":
                if timeout_kind(payload, {}) == "condition_timeout":
                    continue
                active = self._active
                if (active is not None and sequence is not None and active[1] is not None and sequence != active[1]
                        and active[2] is not None and payload.get("delay_seconds") == active[2]
                        and text(payload.get("timer_id")) is not None and text(payload.get("timer_kind")) is None):
                    added[sequence] = self.aliases[sequence] = active[0]
                    continue
                self._active = None
            elif kind in ("TimerFired", "TimerCancelled"):
                if (sequence is not None and sequence in self.aliases) or timeout_kind(payload, wait_ids):
                    self._active = None
            elif kind in ("ConditionWaitSatisfied", "ConditionWaitTimedOut"):
                wait_id = text(payload.get("condition_wait_id"))
                if self._active is not None and wait_id in (None, self._active[0]):
                    self._active = None
            elif kind in ("WorkflowCompleted", "WorkflowFailed", "WorkflowContinuedAsNew", "ActivityScheduled",
                          "ChildWorkflowScheduled"):
                self._active = None
        return added


def _boundary(kind: Optional[str], payload: Mapping[str, Any], wait_ids: Mapping[int, str]) -> Optional[str]:
    """Whether an event closes a condition wait ("condition"), is a durable step ("step"), or neither."""
    if kind in ("ConditionWaitSatisfied", "ConditionWaitTimedOut"):
        return "condition"
    if kind in ("TimerFired", "TimerCancelled") and timeout_kind(payload, wait_ids) == "condition_timeout":
        return "condition"
    if kind in ("WorkflowCompleted", "WorkflowFailed", "WorkflowContinuedAsNew", "ActivityScheduled",
                "ActivityStarted", "ChildWorkflowScheduled", "ChildRunStarted"):
        return "step"
    if kind == "TimerScheduled":
        return "step" if timeout_kind(payload, wait_ids) is None else None
    if kind in RESOLVED_EVENTS or (kind == "TimerFired" and timeout_kind(payload, wait_ids) is None):
        return "step"
    return None


class WaitBinder:
    """Which condition wait (if any) each signal/update receiver belongs to, by event index.

    * A receiver recorded while a wait is open belongs to that wait.
    * When several arrive during one open wait and the run then re-opens the wait (no
      boundary in between), the later ones belong to the re-open: the task woken by the
      first one was still running when they were recorded.
    * Receivers recorded before any wait belong to the next wait opened, unless a durable
      step separates them from it (then they apply by result position). Such receivers
      arrived while the opening task ran; the task they woke is the one that may re-open,
      so everything recorded between the open and that re-open belongs to the re-open.
      (The published SDK binds the first of those to the old open and fails this history
      with a non-determinism error.)
    """

    def __init__(self) -> None:
        self._settled: Dict[int, Optional[str]] = {}
        self._prefix: List[int] = []
        self._prefix_binds = True
        self._current: Optional[str] = None
        self._since_open: List[int] = []
        self._woken_by_prefix = False

    def feed(self, events: List[Digested], offset: int, wait_ids: Mapping[int, str]) -> None:
        """Scan ``events`` (``history.digest``), whose first one sits at history position ``offset``."""
        bindings = self._settled
        for index, (_, kind, payload, sequence) in enumerate(events, offset):
            if kind == "ConditionWaitOpened":
                wait_id = text(payload.get("condition_wait_id"))
                if wait_id is None:
                    continue
                if self._current is None:
                    self._woken_by_prefix = bool(self._prefix) and self._prefix_binds
                    for receiver in self._prefix:
                        bindings[receiver] = wait_id if self._prefix_binds else None
                else:
                    # The task that recorded this re-open was woken by the first receiver after
                    # the previous open -- or, when receivers were already recorded before that
                    # open (they arrived while the opening task ran), by those: then every
                    # receiver since the open arrived during the re-opening task.
                    since = self._since_open if self._woken_by_prefix else self._since_open[1:]
                    for receiver in since:
                        bindings[receiver] = wait_id
                    self._woken_by_prefix = False
                self._prefix, self._prefix_binds, self._current, self._since_open = [], True, wait_id, []
                continue
            if kind in ("SignalReceived", "UpdateApplied"):
                if self._current is None:
                    if self._prefix_binds or sequence is None:
                        self._prefix.append(index)
                    else:
                        bindings[index] = None
                else:
                    self._since_open.append(index)
                    if len(self._since_open) == 1:
                        bindings[index] = self._current
                continue
            boundary = _boundary(kind, payload, wait_ids)
            if boundary is None:
                continue
            if self._current is None:
                if boundary == "step":
                    for receiver in self._prefix:
                        bindings[receiver] = None
                    self._prefix, self._prefix_binds = [], False
                continue
            for receiver in self._since_open:
                bindings.setdefault(receiver, self._current)
            self._current, self._since_open, self._prefix_binds = None, [], boundary == "condition"

    def unsettled(self) -> List[int]:
        """The receivers whose binding later events may still change."""
        return self._prefix + self._since_open

    def binding(self, index: int) -> Optional[str]:
        """The binding of receiver ``index`` as the history stands (as if it ended here)."""
        if index in self._prefix:
            return None
        if index in self._settled:
            return self._settled[index]
        return self._current if index in self._since_open else None

    def bindings(self) -> Dict[int, Optional[str]]:
        """Every receiver's binding as the history stands."""
        out = dict(self._settled)
        for receiver in self._prefix:
            out[receiver] = None
        for receiver in self._since_open:
            out.setdefault(receiver, self._current)
        return out
