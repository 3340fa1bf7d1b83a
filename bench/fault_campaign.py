"""Fault campaign: real processes, real signals, then a fuzz of the live dev server.

What it does (about two minutes):

1. starts ``sync-worker devserver`` (SQLite file, 3 s workflow-task lease) and ``sync-worker run
   bench._fault_app:make_worker`` (``--health-port`` for ``/readyz``) as child processes;
2. starts workflows of 3 activities each, whose side effects are appended to a file with the
   worker's pid, and meanwhile: ``kill -9`` the worker (restarted), ``kill -9`` the server for
   an outage of a few seconds (restarted on the same port and database, twice), ``SIGTERM`` the
   worker (warm shutdown, restarted), starting more workflows as it goes;
3. waits for every workflow to complete and fuzzes the live server with 1,000 requests (valid
   bodies with one field replaced by a hostile value: NaN, Infinity, 1e308, huge integers,
   deep nesting, wrong types, garbage JSON).

It prints: runs lost (not completed), duplicate side effects (split into those after a worker
``kill -9``, which at-least-once delivery allows, and any other), readiness recovery (seconds
from the restarted server answering ``/api/health`` to the worker's ``/readyz`` answering 200),
and the fuzz's 5xx count. Nothing is asserted; ``--workflows N`` and ``--outage S`` tune it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from sync_worker.client import Client  # noqa: E402
from sync_worker.payloads import envelope  # noqa: E402

QUEUE = "fault-q"
WORKER = {"X-Durable-Workflow-Protocol-Version": "1.20", "Content-Type": "application/json"}
CONTROL = {"X-Durable-Workflow-Control-Plane-Version": "2", "Content-Type": "application/json"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env() -> Dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))


class Campaign:
    def __init__(self, workdir: str, workflows: int, outage: float) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.health_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db = os.path.join(workdir, "dev.sqlite3")
        self.effects = os.path.join(workdir, "effects.jsonl")
        self.workflows = workflows
        self.outage = outage
        self.server: Optional[subprocess.Popen[bytes]] = None
        self.worker: Optional[subprocess.Popen[bytes]] = None
        self.killed_worker_pids: List[int] = []
        self.started: List[str] = []
        self.recoveries: List[float] = []
        self.faults: List[str] = []
        self.log = open(os.path.join(workdir, "processes.log"), "ab")  # noqa: SIM115 - closed in stop()
        self.outages: List[Tuple[float, float]] = []  # (wall-clock start, seconds)

    # -- processes ---------------------------------------------------------------------------
    def start_server(self) -> None:
        self.server = subprocess.Popen(
            [sys.executable, "-m", "sync_worker.cli", "devserver", "--port", str(self.port), "--db", self.db,
             "--workflow-task-lease", "3", "--activity-task-lease", "10", "--long-poll-max", "5", "-l", "WARNING"],
            cwd=REPO, env=env(), stdout=self.log, stderr=self.log)
        self.wait_server()

    def wait_server(self, timeout: float = 20.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                conn.request("GET", "/api/health")
                if conn.getresponse().status == 200:
                    return time.monotonic()
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("the dev server did not come up")

    def start_worker(self) -> None:
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "sync_worker.cli", "run", "bench._fault_app:make_worker", "-Q", QUEUE,
             "--server-url", self.url, "--health-port", str(self.health_port), "--max-startup-wait", "120",
             "-l", "WARNING"],
            cwd=REPO, env=dict(env(), FAULT_EFFECTS=self.effects), stdout=self.log, stderr=self.log)
        self.wait_ready(30.0)

    def ready(self) -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.health_port, timeout=1)
            conn.request("GET", "/readyz")
            return conn.getresponse().status == 200
        except OSError:
            return False

    def wait_ready(self, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready():
                return time.monotonic()
            time.sleep(0.05)
        raise RuntimeError("the worker did not become ready")

    def kill_worker(self, sig: int) -> None:
        assert self.worker is not None
        if sig == signal.SIGKILL:
            self.killed_worker_pids.append(self.worker.pid)
        self.worker.send_signal(sig)
        self.worker.wait(30)
        self.faults.append("worker kill -9" if sig == signal.SIGKILL else "worker SIGTERM")

    def server_outage(self, seconds: float) -> None:
        assert self.server is not None
        self.outages.append((time.time(), seconds))
        self.server.kill()
        self.server.wait(10)
        time.sleep(seconds)
        self.start_server()
        up = time.monotonic()
        ready = self.wait_ready(60.0)
        self.recoveries.append(ready - up)
        self.faults.append(f"server kill -9 + {seconds:g} s outage")

    def stop(self) -> None:
        for process in (self.worker, self.server):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
        self.log.close()

    # -- workload ----------------------------------------------------------------------------
    def start_workflows(self, count: int) -> None:
        client = Client(self.url, timeout=10)
        for _ in range(count):
            workflow_id = f"fault-{len(self.started)}"
            for _attempt in range(50):
                try:
                    client.start_workflow("fault.flow", workflow_id, 3, task_queue=QUEUE, workflow_id=workflow_id)
                    break
                except Exception:
                    time.sleep(0.2)
            self.started.append(workflow_id)
        client.close()

    def lost_runs(self, timeout: float) -> List[str]:
        client = Client(self.url, timeout=10)
        deadline = time.monotonic() + timeout
        pending = list(self.started)
        while pending and time.monotonic() < deadline:
            still = []
            for workflow_id in pending:
                try:
                    status = client.describe_workflow(workflow_id).status
                except Exception:
                    status = None
                if status != "completed":
                    still.append(workflow_id)
            pending = still
            if pending:
                time.sleep(0.5)
        client.close()
        return pending

    def duplicates(self) -> Tuple[int, int, int]:
        """(after a worker kill -9, after an outage longer than the lease, otherwise)."""
        from bench._fault_app import LEASE_SECONDS

        seen: Dict[Tuple[str, int], List[Dict[str, Any]]] = {}
        with open(self.effects) as handle:
            for line in handle:
                row = json.loads(line)
                seen.setdefault((row["wf"], row["step"]), []).append(row)
        killed = outlasted = other = 0
        for rows in seen.values():
            for earlier in rows[:-1]:
                if earlier["pid"] in self.killed_worker_pids:
                    killed += 1
                elif any(seconds > LEASE_SECONDS and start - LEASE_SECONDS <= earlier["at"] <= start
                         for start, seconds in self.outages):
                    outlasted += 1
                else:
                    other += 1
        return killed, outlasted, other

    # -- fuzz --------------------------------------------------------------------------------
    def fuzz(self, count: int, seed: int = 9) -> Tuple[int, Dict[int, int]]:
        rng = random.Random(seed)
        hostile = ["NaN", "Infinity", "-Infinity", "1e308", "1e999", "-1", "0", "1e12", "9" * 40, '"abc"', "null",
                   "[]", "{}", "true", "[" * 300 + "]" * 300, '"' + "x" * 3000 + '"', '{"codec":"json","blob":"1"}']
        bodies: List[Tuple[str, Dict[str, str], Dict[str, Any]]] = [
            ("/api/workflows", CONTROL, {"workflow_id": "fz", "workflow_type": "t", "task_queue": "fz-q",
                                         "input": envelope([]), "execution_timeout_seconds": 60,
                                         "run_timeout_seconds": 30}),
            ("/api/activities", CONTROL, {"activity_type": "a", "task_queue": "fz-q", "input": envelope([]),
                                          "start_to_close_timeout_seconds": 30, "retry_policy": {"max_attempts": 2}}),
            ("/api/worker/activity-tasks/poll", WORKER, {"worker_id": "fz-w", "task_queue": "fz-empty",
                                                         "timeout_seconds": 0}),
            ("/api/worker/workflow-tasks/wft-fz/complete", WORKER, {
                "lease_owner": "fz-w", "workflow_task_attempt": 1,
                "commands": [{"type": "schedule_activity", "activity_type": "a", "arguments": envelope([]),
                              "start_to_close_timeout": 30}, {"type": "start_timer", "delay_seconds": 5}]}),
            ("/api/worker/register", WORKER, {"worker_id": "fz-w", "task_queue": "fz-q", "runtime": "python",
                                              "supported_workflow_types": [], "max_concurrent_activity_tasks": 4}),
            (f"/api/workflows/{self.started[0]}/signal/go", CONTROL, {"input": envelope([])}),
        ]
        statuses: Dict[int, int] = {}
        five_xx = 0
        for index in range(count):
            path, headers, body = rng.choice(bodies)
            marker = "\u0000HOSTILE\u0000"
            keys = [*body, "extra"]
            mutated = dict(body)
            key = rng.choice(keys)
            if rng.random() < 0.1:
                data = rng.choice([b"{", b"[1,2]", b"\xff\xfe", b'{"a": NaN}', b"{}" * 10])
            else:
                mutated[key] = marker
                if key == "workflow_id":
                    mutated["workflow_id"] = f"fz-{index}"
                    key = rng.choice([k for k in keys if k != "workflow_id"])
                    mutated[key] = marker
                data = json.dumps(mutated).replace(json.dumps(marker), rng.choice(hostile)).encode()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                conn.request("POST", path, body=data, headers=headers)
                status = conn.getresponse().status
            except OSError:
                status = 0
            statuses[status] = statuses.get(status, 0) + 1
            if status >= 500 or status == 0:
                five_xx += 1
        return five_xx, statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=40, help="workflows started (half before the faults)")
    parser.add_argument("--outage", type=float, default=4.0, help="seconds of the first server outage")
    parser.add_argument("--fuzz", type=int, default=1000, help="fuzzed requests at the end")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="fault-campaign-")
    campaign = Campaign(workdir, args.workflows, args.outage)
    began = time.monotonic()
    try:
        campaign.start_server()
        campaign.start_worker()
        half = args.workflows // 2
        campaign.start_workflows(half)
        time.sleep(1.0)
        campaign.kill_worker(signal.SIGKILL)
        campaign.start_worker()
        campaign.server_outage(args.outage)
        campaign.start_workflows(args.workflows - half - args.workflows // 4)
        time.sleep(1.0)
        campaign.kill_worker(signal.SIGTERM)
        campaign.start_worker()
        campaign.server_outage(args.outage * 3)
        campaign.start_workflows(args.workflows // 4)
        time.sleep(0.5)
        campaign.kill_worker(signal.SIGKILL)
        campaign.start_worker()
        lost = campaign.lost_runs(timeout=120.0)
        killed, outlasted, unexpected = campaign.duplicates()
        five_xx, statuses = campaign.fuzz(args.fuzz)
        still_up = campaign.lost_runs(timeout=1.0) == lost  # reads still answer after the fuzz
    finally:
        campaign.stop()
    activities = len(campaign.started) * 3
    print(f"fault campaign: {len(campaign.started)} workflows, {activities} activities, "
          f"{time.monotonic() - began:.0f} s; faults: {', '.join(campaign.faults)}")
    print(f"runs lost: {len(lost)} (of {len(campaign.started)})" + (f": {lost[:5]}" if lost else ""))
    print(f"duplicate side effects: {killed + outlasted + unexpected} ({killed} after a worker kill -9 and "
          f"{outlasted} after a server outage longer than the activity lease, both allowed by at-least-once; "
          f"{unexpected} otherwise)")
    print("readiness recovery after a server restart: "
          + ", ".join(f"{r:.2f} s" for r in campaign.recoveries) + f" (max {max(campaign.recoveries):.2f} s)")
    print(f"fuzz: {args.fuzz} requests, 5xx (or no answer): {five_xx}; statuses {dict(sorted(statuses.items()))}; "
          f"server still answering: {still_up}")
    print(f"(logs of the child processes: {campaign.workdir}/processes.log)")


if __name__ == "__main__":
    main()
