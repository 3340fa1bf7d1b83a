"""One run of the memory scenario: a ``sync-worker run`` process in a memory-limited cgroup.

Used by the cgroup test and by ``bench/memory_gate.py``: N standalone activities that each
allocate and touch ``megabytes`` are enqueued on the dev server first, then one worker process
with the given concurrency arguments (``-c 8``, ``--autoscale 8``...) runs them inside a fresh
cgroup limited to ``limit_mb``. The outcome says whether the kernel killed it, how many
activities completed, the cgroup's peak charge and the worker's own final figures.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from sync_worker.client import Client

from ._cgroup import MemoryCgroup

__all__ = ["Outcome", "run_scenario"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Outcome:
    returncode: Optional[int]
    oom_killed: bool
    completed: int
    wall_seconds: float
    peak_bytes: Optional[int]
    limit_bytes: int
    events: Dict[str, int]
    status: Dict[str, Any] = field(default_factory=dict)
    log: str = field(default="", repr=False)

    @property
    def deferrals(self) -> int:
        return int(self.status.get("memory", {}).get("deferrals", 0))


def run_scenario(server_url: str, concurrency_args: Sequence[str], *, pool: str = "threads",
                 limit_mb: int = 700, tasks: int = 16, megabytes: int = 200, hold_seconds: float = 0.5,
                 timeout: float = 180.0, concurrency_json: Optional[str] = None) -> Outcome:
    queue = f"memgate-{uuid.uuid4().hex[:8]}"
    client = Client(server_url)
    handle, status_path = tempfile.mkstemp(prefix="sw-memgate-", suffix=".json")
    os.close(handle)
    try:
        with tempfile.TemporaryFile(mode="w+") as log:
            return _run(client, queue, server_url, concurrency_args, pool, limit_mb, tasks, megabytes,
                        hold_seconds, timeout, concurrency_json, status_path, log)
    finally:
        client.close()
        os.unlink(status_path)


def _run(client: Client, queue: str, server_url: str, concurrency_args: Sequence[str], pool: str, limit_mb: int,
         tasks: int, megabytes: int, hold_seconds: float, timeout: float, concurrency_json: Optional[str],
         status_path: str, log: Any) -> Outcome:
    env = dict(os.environ, SW_MEMGATE_STATUS_FILE=status_path, SW_MEMGATE_CONCURRENCY=concurrency_json or "",
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p))
    argv: List[str] = [sys.executable, "-m", "sync_worker", "run", "tests.cgroup._memory_hungry:build",
                       "-Q", queue, "--server-url", server_url, "-P", pool, "-l", "INFO", *concurrency_args]
    cgroup = MemoryCgroup(limit_mb * 1024 * 1024)
    process: Optional[subprocess.Popen[str]] = None
    try:
        ids = [client.start_activity("cg.allocate", megabytes, hold_seconds, task_queue=queue)["activity_id"]
               for _ in range(tasks)]
        started = time.monotonic()
        process = subprocess.Popen(cgroup.command(argv), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   text=True)
        deadline = started + timeout
        done: set = set()
        while time.monotonic() < deadline and len(done) < tasks and process.poll() is None:
            for activity_id in ids:
                if activity_id not in done and client.describe_activity(activity_id).get("status") == "completed":
                    done.add(activity_id)
            time.sleep(0.2)
        wall = time.monotonic() - started
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # warm shutdown: drain, deregister, dump the status
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        events = cgroup.events()
        status: Dict[str, Any] = {}
        try:
            with open(status_path) as status_file:
                text = status_file.read()
            status = json.loads(text) if text else {}
        except (OSError, ValueError):
            status = {}
        log.seek(0)
        return Outcome(returncode=process.returncode, oom_killed=process.returncode == -signal.SIGKILL
                       and events["oom_kill"] > 0, completed=len(done), wall_seconds=wall,
                       peak_bytes=cgroup.peak_bytes(), limit_bytes=cgroup.limit_bytes, events=events,
                       status=status, log=log.read())
    finally:
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)
        cgroup.close()
