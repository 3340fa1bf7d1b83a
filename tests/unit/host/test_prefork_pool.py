"""``PreforkPool`` over fake runtimes: real forks, real signals sent from this process, a watchdog.

The pool runs in a child process (``_prefork_child.py``); its own children print when they run
and when they are stopped. The worker-level behaviour against the dev server is in
``tests/e2e/test_prefork_pool.py``.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Dict, Iterator, List, Tuple

import pytest

from sync_worker.host import EXIT_COLD_STOP, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
WATCHDOG_SECONDS = 30

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the prefork pool forks (POSIX only)")


class Pool:
    def __init__(self, scenario: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")])
        self.process = subprocess.Popen([sys.executable, "-m", "tests.unit.host._prefork_child", scenario], cwd=REPO,
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: List[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line.rstrip("\n"))

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, count: int = 1) -> List[str]:
        deadline = time.monotonic() + WATCHDOG_SECONDS
        while time.monotonic() < deadline:
            found = [line for line in list(self.lines) if re.search(pattern, line)]
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(f"{pattern!r} x{count} not seen:\n{self.output()}")

    def running(self) -> Dict[str, int]:
        """tag -> pid of every child that printed RUN (the latest per tag)."""
        return {m.group(1): int(m.group(2)) for line in self.lines if (m := re.match(r"RUN (\S+) (\d+)", line))}

    def port(self) -> int:
        line = self.wait_for(r"health probes on http://127\.0\.0\.1:\d+")[0]
        return int(re.search(r"127\.0\.0\.1:(\d+)", line).group(1))  # type: ignore[union-attr]

    def probe(self, path: str) -> Tuple[int, Dict[str, object]]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port()}{path}", timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def wait_ready(self) -> None:
        deadline = time.monotonic() + WATCHDOG_SECONDS
        while time.monotonic() < deadline:
            if self.probe("/readyz")[0] == 200:
                return
            time.sleep(0.05)
        raise AssertionError(f"the pool never got ready:\n{self.output()}")

    def signal(self, signum: int) -> None:
        os.kill(self.process.pid, signum)

    def wait_exit(self) -> int:
        try:
            code = self.process.wait(WATCHDOG_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the pool did not exit within {WATCHDOG_SECONDS}s:\n{self.output()}") from None
        time.sleep(0.1)  # the reader thread takes the last lines
        return code


@pytest.fixture
def pools() -> Iterator[List[Pool]]:
    started: List[Pool] = []
    yield started
    for pool in started:
        if pool.process.poll() is None:
            pool.process.kill()
            pool.process.wait()
        for pid in pool.running().values():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def start(pools: List[Pool], scenario: str) -> Pool:
    pool = Pool(scenario)
    pools.append(pool)
    return pool


def test_sigterm_stops_every_child_warm_and_exits_0(pools: List[Pool]) -> None:
    pool = start(pools, "ok")
    pool.wait_ready()
    _, body = pool.probe("/readyz")
    children = body["pool"]["children"]  # type: ignore[index]
    assert sorted(c["tag"] for c in children) == ["a0.0", "a1.0", "w0.0"]  # type: ignore[index]
    assert len({c["pid"] for c in children}) == 3 and pool.process.pid not in {c["pid"] for c in children}  # type: ignore[index]
    pool.signal(signal.SIGTERM)
    assert pool.wait_exit() == EXIT_OK, pool.output()
    assert sorted(line for line in pool.lines if line.startswith("STOP")) == [
        "STOP a0.0 False", "STOP a1.0 False", "STOP w0.0 False"]


def test_sigint_reaches_the_children_once_and_warm(pools: List[Pool]) -> None:
    pool = start(pools, "ok")
    pool.wait_ready()
    pool.signal(signal.SIGINT)
    assert pool.wait_exit() == EXIT_OK, pool.output()
    assert len([line for line in pool.lines if line.startswith("STOP")]) == 3


def test_a_drain_left_incomplete_exits_3(pools: List[Pool]) -> None:
    pool = start(pools, "incomplete")
    pool.wait_ready()
    pool.signal(signal.SIGTERM)
    assert pool.wait_exit() == EXIT_INCOMPLETE, pool.output()


def test_a_second_signal_is_cold_and_sigquit_too(pools: List[Pool]) -> None:
    pool = start(pools, "slow-drain")
    pool.wait_ready()
    pool.signal(signal.SIGTERM)
    pool.wait_for("STOP .* False", 3)
    started = time.monotonic()
    pool.signal(signal.SIGTERM)
    assert pool.wait_exit() == EXIT_COLD_STOP, pool.output()
    assert time.monotonic() - started < 10
    assert len([line for line in pool.lines if re.match(r"STOP .* True", line)]) == 3

    pool = start(pools, "slow-drain")
    pool.wait_ready()
    pool.signal(signal.SIGQUIT)
    assert pool.wait_exit() == EXIT_COLD_STOP, pool.output()


def test_a_killed_child_is_replaced_and_readiness_comes_back(pools: List[Pool]) -> None:
    pool = start(pools, "ok")
    pool.wait_ready()
    victim = pool.running()["a1.0"]
    os.kill(victim, signal.SIGKILL)
    pool.wait_for(r"prefork child a1\.0 killed by SIGKILL while the pool runs; starting a replacement")
    pool.wait_for(r"RUN a1\.1 \d+")
    pool.wait_ready()
    _, body = pool.probe("/readyz")
    pool_body = body["pool"]
    assert pool_body["replaced"] == 1  # type: ignore[index]
    assert victim not in {c["pid"] for c in pool_body["children"]}  # type: ignore[index]
    pool.signal(signal.SIGTERM)
    assert pool.wait_exit() == EXIT_OK, pool.output()


def test_a_child_stopped_while_it_builds_its_worker_leaves_at_once(pools: List[Pool]) -> None:
    pool = start(pools, "slow-build")
    pool.wait_for(r"prefork child w0\.0 started")
    pool.signal(signal.SIGTERM)
    assert pool.wait_exit() == EXIT_OK, pool.output()
    assert pool.output().count("stopped before it started (warm)") == 3
    assert not pool.running()


@pytest.mark.parametrize("attempt", range(3))
def test_a_sigterm_right_after_a_fork_is_not_lost(pools: List[Pool], attempt: int) -> None:
    # the children may not have their own handlers yet: the signal waits, blocked, across the fork
    pool = start(pools, "ok")
    pool.wait_for(r"prefork child a0\.0 started")
    pool.signal(signal.SIGTERM)
    assert pool.wait_exit() == EXIT_OK, pool.output()


def test_a_child_that_cannot_build_its_worker_fails_the_pool(pools: List[Pool]) -> None:
    pool = start(pools, "build-fails")
    assert pool.wait_exit() == EXIT_FAILED, pool.output()
    assert "could not build its worker: RuntimeError: cannot build the worker" in pool.output()
    assert "prefork pool failed" in pool.output()
