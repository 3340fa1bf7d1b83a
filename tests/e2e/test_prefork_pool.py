"""``sync-worker run -P prefork``: real processes, real signals, the real dev server.

Each test starts the pool as a subprocess (``python -m sync_worker.cli run -P prefork ...``),
drives it through the server, and reads which process did what from the activities' answers
(each returns its pid) and the workers' registrations (``process_metrics.process_id``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from sync_worker.client import Client
from sync_worker.host.exits import EXIT_COLD_STOP, EXIT_OK

from ._worker_support import unique_queue, wait_for

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the prefork pool forks (POSIX only)")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WATCHDOG_SECONDS = 40


class Pool:
    """A ``sync-worker run -P prefork`` subprocess whose output goes to a file (read at will)."""

    def __init__(self, url: str, queue: str, *flags: str, by_environment: bool = False) -> None:
        self.log = tempfile.NamedTemporaryFile("w+", prefix="prefork-", suffix=".log", delete=False)  # noqa: SIM115
        env = dict(os.environ, DURABLE_WORKFLOW_SERVER_URL=url, PYTHONPATH=REPO)
        env.pop("SYNC_WORKER_POOL", None)
        if by_environment:
            env["SYNC_WORKER_POOL"] = "prefork"
        pool = [] if by_environment else ["-P", "prefork"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sync_worker.cli", "run", "tests.e2e._prefork_app:make_worker", "-Q", queue,
             *pool, "-l", "INFO", *flags],
            cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT, text=True)

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        with open(self.log.name) as handle:
            return handle.read()

    def wait_exit(self) -> int:
        try:
            return self.process.wait(WATCHDOG_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the pool did not exit within {WATCHDOG_SECONDS}s:\n{self.output()}") from None

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:
                pass
            self.process.kill()
            self.process.wait()
        self.log.close()
        os.unlink(self.log.name)


@pytest.fixture
def client(dev_server_session: Any) -> Iterator[Client]:
    c = Client(dev_server_session.url)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def pools() -> Iterator[List[Pool]]:
    started: List[Pool] = []
    try:
        yield started
    finally:
        for pool in started:
            pool.close()


def start(pools: List[Pool], url: str, queue: str, *flags: str) -> Pool:
    pool = Pool(url, queue, *flags)
    pools.append(pool)
    return pool


def rows(client: Client, queue: str) -> List[Any]:
    return list(client.list_workers(task_queue=queue).workers)


def active_children(client: Client, queue: str) -> Dict[str, int]:
    """worker id -> pid of the active registrations."""
    return {w.worker_id: int(w.process_metrics["process_id"]) for w in rows(client, queue) if w.status == "active"}


def result(client: Client, handle: Any, timeout: float = 30) -> Any:
    return client.get_activity_result(handle, timeout=timeout)


def children_of(parent: int) -> List[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(entry))
    return found


def health_port(pool: Pool) -> int:
    def find() -> Optional[int]:
        match = re.search(r"health probes on http://127\.0\.0\.1:(\d+)/healthz", pool.output())
        return int(match.group(1)) if match else None

    return int(wait_for(find, timeout=20))


def probe(port: int, path: str) -> Tuple[int, Dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_activities_run_in_child_processes_and_workflows_in_one(client: Client, dev_server_session: Any,
                                                                pools: List[Pool]) -> None:
    queue = unique_queue("prefork")
    pool = start(pools, dev_server_session.url, queue, "-c", "2", "--health-port", "0")
    port = health_port(pool)
    wait_for(lambda: probe(port, "/readyz")[0] == 200, timeout=30)
    _, body = probe(port, "/readyz")
    assert body["pool"]["state"] == "running"
    assert sorted(c["tag"] for c in body["pool"]["children"]) == ["a0.0", "a1.0", "w0.0"]
    assert all(c["alive"] and c["ready"] for c in body["pool"]["children"])

    # two long activities at once: two different children, neither of them the parent
    handles = [client.start_activity("prefork.sleep", 1.0, task_queue=queue) for _ in range(2)]
    pids = {result(client, h)["pid"] for h in handles}
    assert len(pids) == 2 and pool.pid not in pids
    assert pids <= set(children_of(pool.pid))

    run = client.start_workflow("prefork.fanout", 3, task_queue=queue)
    answer = client.get_result(run.workflow_id, timeout=30)
    assert answer["workflow_pid"] not in pids | {pool.pid}  # the workflow child
    assert set(answer["activity_pids"]) <= pids
    registrations = {w.worker_id: w for w in rows(client, queue)}
    workflow_rows = [w for w in registrations.values() if w.supported_workflow_types]
    assert [w.supported_activity_types for w in workflow_rows] == [[]]
    assert all(w.max_concurrent_activity_tasks == 1 for w in registrations.values() if w.supported_activity_types)

    os.kill(pool.pid, signal.SIGTERM)
    assert pool.wait_exit() == EXIT_OK, pool.output()
    assert {w.status for w in rows(client, queue)} == {"deregistered"}, pool.output()
    assert "threads run in the parent before the fork" not in pool.output()  # loading a worker starts none


def test_warm_stop_drains_every_child(client: Client, dev_server_session: Any, pools: List[Pool]) -> None:
    queue = unique_queue("prefork")
    pool = start(pools, dev_server_session.url, queue, "-c", "2")
    handles = [client.start_activity("prefork.sleep", 2.0, task_queue=queue) for _ in range(2)]
    for handle in handles:
        wait_for(lambda h=handle: client.describe_activity(h.activity_id).get("last_heartbeat_at"), timeout=30)
    os.kill(pool.pid, signal.SIGTERM)
    assert pool.wait_exit() == EXIT_OK, pool.output()
    assert [result(client, h, timeout=5)["slept"] for h in handles] == [2.0, 2.0]
    assert {w.status for w in rows(client, queue)} == {"deregistered"}
    assert pool.output().count("warm shutdown, draining") == 3  # two activity children and the workflow child


def test_second_signal_is_a_cold_stop_of_every_child(client: Client, dev_server_session: Any,
                                                      pools: List[Pool]) -> None:
    queue = unique_queue("prefork")
    pool = start(pools, dev_server_session.url, queue, "-c", "2")
    handle = client.start_activity("prefork.sleep", 60.0, task_queue=queue)
    wait_for(lambda: client.describe_activity(handle.activity_id).get("last_heartbeat_at"), timeout=30)
    children = children_of(pool.pid)
    assert len(children) == 3
    os.kill(pool.pid, signal.SIGTERM)
    time.sleep(0.5)
    started = time.monotonic()
    os.kill(pool.pid, signal.SIGTERM)
    assert pool.wait_exit() == EXIT_COLD_STOP, pool.output()
    assert time.monotonic() - started < 15
    for child in children:
        assert _gone(child)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_child_killed_mid_task_is_replaced_and_the_task_retried(client: Client, dev_server_session: Any,
                                                                   pools: List[Pool]) -> None:
    queue = unique_queue("prefork")
    pool = start(pools, dev_server_session.url, queue, "-c", "1")
    handle = client.start_activity("prefork.sleep", 3.0, task_queue=queue, heartbeat_timeout=2,
                                   retry_policy={"max_attempts": 3, "backoff_seconds": [1]})
    wait_for(lambda: client.describe_activity(handle.activity_id).get("last_heartbeat_at"), timeout=30)
    # -c 1: the one activity child runs it
    [victim_pid] = [pid for worker_id, pid in active_children(client, queue).items() if worker_id.endswith("-a0.0")]
    assert victim_pid in children_of(pool.pid)
    os.kill(victim_pid, signal.SIGKILL)
    answer = result(client, handle, timeout=40)
    assert answer["pid"] != victim_pid and answer["slept"] == 3.0
    assert answer["pid"] in children_of(pool.pid)
    assert "a0.0 killed by SIGKILL while the pool runs; starting a replacement" in pool.output()
    assert "prefork child a0.1 started" in pool.output()
    os.kill(pool.pid, signal.SIGTERM)
    assert pool.wait_exit() == EXIT_OK, pool.output()


def test_recycling_by_task_count(client: Client, dev_server_session: Any, pools: List[Pool]) -> None:
    queue = unique_queue("prefork")
    pool = start(pools, dev_server_session.url, queue, "-c", "1", "--max-tasks-per-child", "2")
    handles = [client.start_activity("prefork.pid", task_queue=queue) for _ in range(7)]
    pids = [result(client, h) for h in handles]
    runs: Dict[int, int] = {}
    for pid in pids:
        runs[pid] = runs.get(pid, 0) + 1
    assert len(pids) == 7 and max(runs.values()) <= 2 and len(runs) >= 4, pids
    # nothing lost or run twice: every activity completed on its first attempt
    assert [client.describe_activity(h.activity_id).attempt_count for h in handles] == [1] * 7
    wait_for(lambda: pool.output().count("recycled (max-tasks-per-child reached (2 task(s)))") >= 3, timeout=10)
    os.kill(pool.pid, signal.SIGTERM)
    assert pool.wait_exit() == EXIT_OK, pool.output()
    # every recycled child left cleanly: deregistered, nothing stranded
    assert {w.status for w in rows(client, queue)} == {"deregistered"}


def test_recycling_by_memory(client: Client, dev_server_session: Any, pools: List[Pool]) -> None:
    queue = unique_queue("prefork")
    pool = start(pools, dev_server_session.url, queue, "-c", "1", "--max-memory-per-child", str(96 * 1024))
    first = result(client, client.start_activity("prefork.rss", task_queue=queue))
    assert first["rss"] < 96 * 1024 * 1024, first
    grown = result(client, client.start_activity("prefork.grow", 100, task_queue=queue))
    assert grown == first["pid"]  # the leak ran in that child, which then left
    after = result(client, client.start_activity("prefork.rss", task_queue=queue))
    assert after["pid"] != first["pid"] and after["rss"] < 96 * 1024 * 1024, (first, after)
    assert "recycled (max-memory-per-child exceeded" in pool.output()
    os.kill(pool.pid, signal.SIGTERM)
    assert pool.wait_exit() == EXIT_OK, pool.output()


def test_sync_worker_pool_prefork_in_the_environment_chooses_the_pool(client: Client, dev_server_session: Any,
                                                                      pools: List[Pool]) -> None:
    queue = unique_queue("prefork")
    pool = Pool(dev_server_session.url, queue, "-c", "1", by_environment=True)
    pools.append(pool)
    answer = result(client, client.start_activity("prefork.pid", task_queue=queue))
    assert answer in children_of(pool.pid)
    os.kill(pool.pid, signal.SIGTERM)
    assert pool.wait_exit() == EXIT_OK, pool.output()
    assert "pool prefork (1 process(es))" in pool.output()
