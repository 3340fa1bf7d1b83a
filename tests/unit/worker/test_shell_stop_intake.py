"""``RuntimeShell.stop_intake``: the first half of a stop, on its own (a recycling prefork child
stops intake from a slot thread and stops the runtime later, from another thread)."""

from __future__ import annotations

import threading
import time
from typing import Any, List, Optional, Sequence, Tuple

import pytest

from sync_worker.runtime.admission import AdmissionGate, MemoryProbe, resolve_concurrency
from sync_worker.runtime.backend import ThreadBackend
from sync_worker.runtime.shell import RuntimeShell
from sync_worker.runtime.status import StatusBoard, WorkerState

from .fakes import in_thread


class IntakeSource:
    """One critical intake loop that ends when its intake stops (as the long pollers do)."""

    def __init__(self, calls: List[str]) -> None:
        self.calls = calls
        self.shell: Optional[RuntimeShell] = None
        self.intake_stopped = threading.Event()

    def join(self) -> None:
        self.calls.append("join")

    def start(self, shell: RuntimeShell) -> None:
        self.shell = shell
        shell.spawn_loop("poller", lambda: self.intake_stopped.wait(10), role="activity poller", intake=True)

    def stop_intake(self) -> None:
        assert self.shell is None or self.shell.stop_requested.is_set(), "intake stopped before the stop was marked"
        self.calls.append("stop_intake")
        self.intake_stopped.set()

    def intake_grace(self) -> float:
        return 5.0

    def wind_down(self, deadline: float, *, stuck: bool) -> None:
        self.calls.append("wind_down")

    def hand_back(self) -> None:
        self.calls.append("hand_back")

    def close(self, *, clean: bool, deadline: float) -> None:
        self.calls.append(f"close(clean={clean})")

    def abort(self) -> None:
        self.calls.append("abort")

    def describe_running(self) -> str:
        return "test source running"

    def describe_incomplete(self, why: str, running: Sequence[str]) -> str:
        return f"incomplete: {why}"


def _gate() -> AdmissionGate:
    """One slot, re-checked every 10 s: a second caller waits until woken."""
    return AdmissionGate(resolve_concurrency({"start": 1, "max": 1, "admissionPollMs": 10_000}),
                         probe=MemoryProbe(usage_reader=lambda: 100 << 20, limit_reader=lambda: 1 << 30))


def _shell(calls: List[str], gate: Optional[AdmissionGate] = None) -> RuntimeShell:
    shell = RuntimeShell(label="worker", runtime_id="w-1", backend=ThreadBackend(),
                         board=StatusBoard("w-1", "default", "q", time.monotonic), shutdown_timeout=5.0)
    shell.attach(IntakeSource(calls))
    shell.add_gate(gate or _gate())
    return shell


def _supervised(shell: RuntimeShell) -> Tuple[threading.Thread, List[BaseException]]:
    """``begin``/``start`` here, then ``supervise`` on a thread; the list gets what it raised."""
    shell.begin()
    shell.start()
    return in_thread(shell.supervise)


def test_stop_intake_marks_the_stop_lets_gate_waiters_go_and_stops_the_source() -> None:
    calls: List[str] = []
    gate = _gate()
    shell = _shell(calls, gate)
    assert gate.try_reserve() is not None  # the one slot is taken: the next caller waits
    got: List[Any] = []
    waiter = threading.Thread(target=lambda: got.append(gate.reserve()), daemon=True)
    waiter.start()
    deadline = time.monotonic() + 5
    while gate.status().waiting != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    shell.stop_intake()  # IntakeSource.stop_intake asserts the stop was marked before it
    waiter.join(5)
    assert shell.stop_requested.is_set() and calls == ["stop_intake"]
    assert got and got[0] is not None and got[0].forced  # draining: granted at once, not after 10 s
    assert time.monotonic() - started < 2
    shell.stop_intake()  # idempotent: any thread, any number of times
    assert calls == ["stop_intake", "stop_intake"]
    assert not shell.run_started  # nothing drained or closed: that is stop()'s


def test_an_intake_loop_ended_by_stop_intake_is_a_planned_exit_and_stop_still_drains_and_closes() -> None:
    calls: List[str] = []
    shell = _shell(calls)
    supervisor, raised = _supervised(shell)
    poller = shell.loops[0]
    shell.stop_intake()
    assert poller.handle is not None
    poller.handle.join(5)
    assert poller.exited
    supervisor.join(10)  # the supervisor sees the stop, not a crashed poller
    assert raised == []
    shell.stop()
    assert calls[0] == "join" and calls[-2:] == ["wind_down", "close(clean=True)"]
    assert shell.board.state is WorkerState.STOPPED


def test_an_intake_loop_that_ends_without_a_stop_fails_the_runtime() -> None:
    """The contrast: the same loop ending with no stop marked is a crash the supervisor reports."""
    calls: List[str] = []
    shell = _shell(calls)
    supervisor, raised = _supervised(shell)
    source = shell.source
    assert isinstance(source, IntakeSource)
    source.intake_stopped.set()  # the loop ends by itself
    supervisor.join(10)
    assert len(raised) == 1 and "the activity poller exited" in str(raised[0])
    shell.stop()


@pytest.mark.parametrize("cold", [False, True])
def test_stop_is_stop_intake_then_the_drain(cold: bool) -> None:
    calls: List[str] = []
    shell = _shell(calls)
    seen: List[Any] = []
    source = shell.source
    assert isinstance(source, IntakeSource)
    original = source.stop_intake

    def stop_intake() -> None:
        seen.append(shell.cold.is_set())
        original()

    source.stop_intake = stop_intake  # type: ignore[method-assign]
    shell.stop(cold=cold)
    assert calls == ["stop_intake"]  # never run: nothing to drain or close
    assert seen == [cold]  # a cold stop is cold before its intake stops
    assert shell.board.state is WorkerState.STOPPED
