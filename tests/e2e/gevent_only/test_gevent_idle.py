"""An idle gevent worker wakes for its hub stamp only, and a blocked hub is still seen in time.

Collected only by ``tests/gevent_suite.py`` (see this folder's ``conftest.py``): the worker runs
on greenlets in this patched process, or as its own ``sync-worker run -P gevent`` process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from gevent import monkey

from sync_worker import activity
from sync_worker.client import Client
from sync_worker.runtime.gevent_backend import HUB_MONITOR_ENV, hub_monitor_interval

from .._worker_support import RunningWorker, make_worker, unique_queue, wait_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_block_started: List[float] = []


@activity.defn(name="gevent_idle.block_hub")
def block_hub(seconds: float) -> float:
    # Pure computation, no cooperative point: the hub cannot run until it returns.
    started = time.monotonic()
    _block_started.append(started)
    while time.monotonic() - started < seconds:
        pass
    return seconds


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


def _sample_from_a_real_thread(worker: Any, stall: float) -> Tuple[List[Tuple[float, bool, str]], Dict[str, bool]]:
    """``(when, live, reason)`` of ``worker.status()`` every 50 ms from an OS thread (not a greenlet)."""
    start_thread = monkey.get_original("_thread", "start_new_thread")
    real_sleep = monkey.get_original("time", "sleep")
    samples: List[Tuple[float, bool, str]] = []
    stop = {"now": False}

    def sample() -> None:
        while not stop["now"]:
            status = worker.status(event_loop_stall_seconds=stall)
            samples.append((time.monotonic(), status.live, status.live_reason))
            real_sleep(0.05)

    start_thread(sample, ())
    return samples, stop


def test_a_blocked_hub_is_reported_at_most_one_default_interval_after_the_threshold(
        client: Client, monkeypatch: Any) -> None:
    """The documented bound at the default 5 s stamp (docs/gevent.md): never over-reported, and
    reported at most one interval after the block crossed ``event_loop_stall_seconds``."""
    monkeypatch.delenv(HUB_MONITOR_ENV, raising=False)
    interval = hub_monitor_interval()
    assert interval == 5.0
    stall = 2.0
    _block_started.clear()
    queue = unique_queue("gevent-bound")
    worker = make_worker(client, task_queue=queue, activities=[block_hub], poll_timeout=2.0)
    with RunningWorker(worker) as running:
        assert worker.status(event_loop_stall_seconds=stall).live
        samples, stop = _sample_from_a_real_thread(worker, stall)
        try:
            receipt = client.start_activity("gevent_idle.block_hub", stall + interval + 2.0, task_queue=queue)
            assert client.get_activity_result(receipt["activity_id"], timeout=30) > 0
            wait_for(lambda: worker.status(event_loop_stall_seconds=stall).live, timeout=interval + 2)
        finally:
            stop["now"] = True
        assert running.stop() is None
    started = _block_started[0]
    blocked = [(when, reason) for when, live, reason in samples if not live]
    assert blocked, f"the sampling thread never saw the blocked hub ({len(samples)} samples)"
    assert all(reason.startswith("hub_blocked: the gevent hub has been blocked for ") for _, reason in blocked)
    first_seen = blocked[0][0] - started
    # crossed the threshold at `stall`; seen within one interval after (plus one 50 ms sample, slack)
    assert stall < first_seen <= stall + interval + 0.5, first_seen
    for when, reason in blocked:
        reported = float(reason.rsplit("for ", 1)[1].split(" s")[0])
        # (the reason rounds to 0.1 s)
        assert stall - 0.05 <= reported <= when - started + 0.1, (reported, when - started)


def _voluntary_switches(pid: int) -> int:
    """Every return of one of the process's threads from a blocking wait counts one."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as status:
                total += sum(int(line.split()[1]) for line in status if line.startswith("voluntary_ctxt_switches:"))
        except OSError:
            continue
    return total


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counting wake-ups reads Linux's /proc")
def test_an_idle_gevent_worker_process_sleeps_between_hub_stamps_and_a_stop_aborts_its_long_poll(
        dev_server_session: Any) -> None:
    """``sync-worker run -P gevent``, idle on a 35 s long poll with the hub stamp at 60 s: no
    supervisor tick, no control-loop tick every 2 s, no signal-watching loop wakes it; SIGTERM
    still stops it at once."""
    queue = unique_queue("gevent-idle")
    env = {k: v for k, v in os.environ.items() if k not in ("SYNC_WORKER_POOL", "SYNC_WORKER_TEST_POOL")}
    env.update(PYTHONPATH=REPO, DURABLE_WORKFLOW_SERVER_URL=dev_server_session.url, **{HUB_MONITOR_ENV: "60"})
    process = subprocess.Popen(
        [sys.executable, "-m", "sync_worker", "run", "tests.e2e._idle_app:make_worker", "-Q", queue, "-P", "gevent",
         "-l", "INFO"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        lines: List[str] = []
        for line in process.stdout:
            lines.append(line)
            if "running on task queue" in line:
                break
        assert any("(pool gevent;" in line for line in lines), "".join(lines)
        time.sleep(1.5)  # its long poll is in flight
        before = _voluntary_switches(process.pid)
        time.sleep(12.0)
        woke = _voluntary_switches(process.pid) - before
        # The old 5 s supervisor tick alone woke it twice in this window, the CLI's signal loop 120 times.
        assert woke <= 1, f"an idle gevent worker woke {woke} times in 12 s"
        stopping = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(20)
        output = "".join(lines) + process.communicate()[0]
        assert code == 0, output
        assert time.monotonic() - stopping < 5.0, "the stop must abort the 35 s long poll at once"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
