"""``sync_worker.host.serve``: real signals sent from this process to a child running serve over fake
runtimes (``_serve_child.py``), with a watchdog; warm, second signal cold, SIGQUIT, exit codes."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Iterator, List

import pytest

from sync_worker.host import EXIT_COLD_STOP, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
WATCHDOG_SECONDS = 30

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGQUIT"), reason="POSIX signals")


class Child:
    def __init__(self, scenario: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")])
        self.process = subprocess.Popen([sys.executable, "-m", "tests.unit.host._serve_child", scenario], cwd=REPO,
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: List[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + WATCHDOG_SECONDS
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self.process.poll() is not None and self._queue.empty():
                    break
                continue
            self.lines.append(line)
            if text in line:
                return
        self.kill()
        raise AssertionError(f"no {text!r} from the child:\n" + "\n".join(self.lines))

    def send(self, signum: int) -> None:
        os.kill(self.process.pid, signum)

    def exit_code(self) -> int:
        try:
            code = self.process.wait(WATCHDOG_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("serve did not return within the watchdog:\n" + self.output()) from None
        time.sleep(0.05)
        self.output()
        return code

    def output(self) -> str:
        while not self._queue.empty():
            self.lines.append(self._queue.get())
        return "\n".join(self.lines)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def value(self, prefix: str) -> str:
        text = self.output()
        return next(line[len(prefix):] for line in text.splitlines() if line.startswith(prefix))


@pytest.fixture
def child() -> Iterator[List[Child]]:
    started: List[Child] = []
    yield started
    for one in started:
        one.kill()


def run(children: List[Child], scenario: str) -> Child:
    one = Child(scenario)
    children.append(one)
    one.wait_for("READY")
    return one


def test_the_exit_codes_are_named_once() -> None:
    assert (EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_COLD_STOP) == (0, 1, 2, 3, 4)
    from sync_worker.worker import cli

    assert cli.EXIT_COLD_STOP is EXIT_COLD_STOP and cli.EXIT_INCOMPLETE is EXIT_INCOMPLETE


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_first_signal_is_a_warm_stop(child: List[Child], signum: int) -> None:
    one = run(child, "drains")
    time.sleep(1.0)  # idle: the foreground must sleep, not poll
    one.send(signum)
    assert one.exit_code() == EXIT_OK, one.output()
    assert one.value("STOPS a=") == "[False]"
    assert "warm shutdown: draining" in one.output()
    assert int(one.value("WAKEUPS ")) <= 4, one.output()  # a signal and the runtime's end, not a 50 ms loop


def test_second_signal_turns_the_stop_cold(child: List[Child]) -> None:
    one = run(child, "slow-drain")
    one.send(signal.SIGTERM)
    one.wait_for("warm shutdown")
    time.sleep(0.3)
    one.send(signal.SIGTERM)
    assert one.exit_code() == EXIT_COLD_STOP, one.output()
    assert one.value("STOPS a=") == "[False, True]"
    assert "cold stop: abandoning running work" in one.output()


def test_sigquit_is_a_cold_stop_at_once(child: List[Child]) -> None:
    one = run(child, "slow-drain")
    one.send(signal.SIGQUIT)
    assert one.exit_code() == EXIT_COLD_STOP, one.output()
    assert one.value("STOPS a=") == "[True]"


def test_a_drain_cut_at_its_deadline_exits_3(child: List[Child]) -> None:
    one = run(child, "incomplete")
    one.send(signal.SIGINT)
    assert one.exit_code() == EXIT_INCOMPLETE, one.output()
    assert "shutdown deadline reached with act-1 running" in one.output()


def test_a_failed_runtime_exits_1(child: List[Child]) -> None:
    one = run(child, "fails")
    assert one.exit_code() == EXIT_FAILED, one.output()
    assert "worker failed: RuntimeError: a: the poller died" in one.output()
    assert one.value("STOPS a=") == "[]"


def test_a_group_is_served_as_one_runtime(child: List[Child]) -> None:
    one = run(child, "group")
    one.send(signal.SIGTERM)
    assert one.exit_code() == EXIT_OK, one.output()
    assert (one.value("STOPS a="), one.value("STOPS b=")) == ("[False]", "[False]")


def test_a_failed_member_stops_the_group_and_exits_1(child: List[Child]) -> None:
    one = run(child, "group-fails")
    assert one.exit_code() == EXIT_FAILED, one.output()
    assert one.value("STOPS a=") == "[False]"  # the healthy member was drained, not abandoned
    assert "a worker failed (RuntimeError); stopping the others" in one.output()
