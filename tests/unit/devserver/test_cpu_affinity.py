"""``sync-worker devserver --cpu``: the process pins itself to one core by default (``affinity``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from typing import Dict, Iterator, List, Optional

import pytest
import requests

from sync_worker.devserver import affinity
from tests._affinity import LINUX_AFFINITY as _LINUX_AFFINITY
from tests._affinity import distinct_affinities, thread_affinities


class _Server:
    def __init__(self, *args: str, env: Optional[Dict[str, str]] = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "sync_worker", "devserver", "--port", "0", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})})
        self.banner = ""
        deadline = time.monotonic() + 20
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            if line.startswith("Durable Workflow dev server listening on"):
                self.banner = line
                break
        found = re.search(r"listening on (http://[^\s,]+)", self.banner)
        assert found is not None, f"no banner; stderr so far ended with {self.banner!r}"
        self.url = found.group(1)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)
            assert self.proc.stderr is not None
            self.proc.stderr.close()


@pytest.fixture
def serve() -> Iterator[List[_Server]]:
    started: List[_Server] = []
    yield started
    for server in started:
        server.close()


# -- the value ------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, value", [("auto", "auto"), (" AUTO ", "auto"), ("none", "none"), ("3", "3"),
                                         ("007", "7")])
def test_a_cpu_value_is_normalised(spec: str, value: str) -> None:
    assert affinity.parse(spec) == value


@pytest.mark.parametrize("spec", ["", "-1", "1,2", "all", "0x1", "1.0"])
def test_a_malformed_cpu_value_is_refused_with_what_it_takes(spec: str) -> None:
    with pytest.raises(affinity.AffinityError, match="auto, none or a core number"):
        affinity.parse(spec)


def test_none_changes_nothing() -> None:
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    assert affinity.apply("none") is None
    if before is not None:
        assert os.sched_getaffinity(0) == before


def test_auto_leaves_a_build_without_a_gil_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: List[object] = []
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: False, raising=False)
    monkeypatch.setattr(os, "sched_setaffinity", lambda *a: calls.append(a), raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert affinity.apply("auto") is None
    assert calls == []


def test_a_platform_without_affinity_skips_auto_and_refuses_a_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_setaffinity", raising=False)
    assert affinity.apply("auto") is None
    with pytest.raises(affinity.AffinityError, match="no CPU affinity"):
        affinity.apply("0")


# -- applied, in a process of its own (never this test process) -----------------------------------
@pytest.mark.skipif(not _LINUX_AFFINITY, reason="CPU affinity is read from Linux's /proc")
def test_apply_pins_the_threads_already_running_and_those_started_after() -> None:
    core = max(os.sched_getaffinity(0))
    script = textwrap.dedent(f"""
        import os, threading
        from sync_worker.devserver import affinity
        started = threading.Event(); stop = threading.Event()
        def early():
            started.set(); stop.wait()
        threading.Thread(target=early, daemon=True).start(); started.wait()
        assert affinity.apply("{core}") == {core}
        late = threading.Thread(target=stop.wait, daemon=True); late.start()
        tids = [int(t) for t in os.listdir("/proc/self/task")]
        print(len(tids), sorted({{frozenset(os.sched_getaffinity(t)) == frozenset({{{core}}}) for t in tids}}))
        stop.set()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    count, verdicts = out.stdout.split(" ", 1)
    assert int(count) == 3 and verdicts.strip() == "[True]"


@pytest.mark.skipif(not _LINUX_AFFINITY, reason="CPU affinity is read from Linux's /proc")
def test_current_cpu_is_the_core_the_thread_runs_on() -> None:
    script = textwrap.dedent("""
        import os
        from sync_worker.devserver.affinity import current_cpu
        for core in sorted(os.sched_getaffinity(0)):
            os.sched_setaffinity(0, {core})
            print(core, current_cpu())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    pairs = [line.split() for line in out.stdout.splitlines()]
    assert pairs and all(core == seen for core, seen in pairs)


@pytest.mark.skipif(not _LINUX_AFFINITY, reason="CPU affinity is read from Linux's /proc")
def test_the_cli_pins_every_thread_to_the_one_core_it_started_on_by_default(serve: List[_Server]) -> None:
    allowed = os.sched_getaffinity(0)
    server = _Server()
    serve.append(server)
    # Serve a few requests so the connection threads exist, then read every thread's affinity.
    with requests.Session() as session:
        for _ in range(3):
            assert session.get(f"{server.url}/api/health", timeout=5).status_code == 200
        threads = thread_affinities(server.proc.pid)
        assert len(threads) >= 2
        if len(allowed) < 2:  # nothing to choose between: left as it was
            assert "pinned" not in server.banner
            assert set(map(frozenset, threads.values())) == {frozenset(allowed)}
            return
        found = re.search(r"pinned to CPU (\d+)", server.banner)
        assert found is not None, server.banner
        core = int(found.group(1))
        assert core in allowed
        assert set(map(frozenset, threads.values())) == {frozenset({core})}


@pytest.mark.skipif(not _LINUX_AFFINITY, reason="CPU affinity is read from Linux's /proc")
@pytest.mark.parametrize("how", ["option", "environment"])
def test_cpu_none_leaves_the_inherited_affinity(serve: List[_Server], how: str) -> None:
    server = _Server("--cpu", "none") if how == "option" else _Server(env={"SYNC_WORKER_DEVSERVER_CPU": "none"})
    serve.append(server)
    assert "pinned" not in server.banner
    assert requests.get(f"{server.url}/api/health", timeout=5).status_code == 200
    assert distinct_affinities(server.proc.pid) == {frozenset(os.sched_getaffinity(0))}


@pytest.mark.skipif(not _LINUX_AFFINITY, reason="CPU affinity is read from Linux's /proc")
def test_cpu_n_pins_to_that_core(serve: List[_Server]) -> None:
    core = min(os.sched_getaffinity(0))
    server = _Server("--cpu", str(core))
    serve.append(server)
    assert f"pinned to CPU {core})" in server.banner
    assert requests.get(f"{server.url}/api/health", timeout=5).status_code == 200
    assert distinct_affinities(server.proc.pid) == {frozenset({core})}


@pytest.mark.parametrize("value, message", [("x", "auto, none or a core number"),
                                            ("4096", "may run on CPUs")])
def test_a_bad_cpu_value_stops_the_cli_with_a_usage_error(value: str, message: str) -> None:
    if message == "may run on CPUs" and not _LINUX_AFFINITY:
        message = "no CPU affinity"
    out = subprocess.run([sys.executable, "-m", "sync_worker", "devserver", "--port", "0", "--cpu", value],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "Invalid value for --cpu" in out.stderr and message in out.stderr
