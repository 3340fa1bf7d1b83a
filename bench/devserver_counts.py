"""What the dev server's engine does per activity, per start and per workflow, counted in process (no HTTP).

    python3 bench/devserver_counts.py                          # this tree
    python3 bench/devserver_counts.py --baseline /tmp/before   # and another tree's, interleaved

Each measurement runs in its own process on a fresh ``--db`` file (WAL mode, as ``sync-worker
devserver --db``), calling the route handlers directly, one request at a time (each request commits,
as a request alone does on the server, and its answer is encoded as the server encodes it). The
activities are queued by one engine, which then closes, and polled and completed by a second one
on the same file: as in ``devserver_targets.py``, whose server opens a file another process filled
(and as after a restart), so nothing about the queued runs is remembered in memory. Printed per tree, per round:

- a standalone no-op activity's poll + complete: SQL statements (``sqlite3`` trace callback, BEGIN
  and COMMIT included), WAL pages written (the WAL's growth, checkpoints held off), engine CPU (ms);
- a workflow start with the SDK's default timeouts (600 s run, 3,600 s execution): the same three;
- a one-activity workflow, as a worker drives it: the start, a workflow task's poll + complete
  (``schedule_activity``), the activity's poll + complete, a workflow task's poll + complete
  (``complete_workflow``): the same three;
- ``serial``: that workflow plus the client's result read (``get_result``'s history read with
  ``wait_new_event``, here of the closed run: the serial chain's requests, each once);
- ``standalone``: one Celery-facade task as the dev server sees it: the control route's start of a
  standalone activity with the body ``.delay()`` sends (its id, its input, the default task's retry
  policy and timeouts), the worker's poll, its complete, and the result's describe
  (``GET /api/activities/{id}``): the four requests, each once.

With ``--instructions`` (needs ``valgrind``), each tree's user-space instructions per operation
instead of the CPU time: each operation runs twice under ``valgrind --tool=cachegrind
--cache-sim=no``, for ``--small`` and ``--large`` operations on the same filled file, and the
difference over the extra operations is the count (start-up, filling and shutdown cancel out). A
count does not move with the machine's load; system calls (the WAL's writes, the locks) are not in it.

The counts are exact and repeatable; the CPU figures move with the machine's load (compare trees
in the same run, not across runs). The wire, the threads and the kernel's share of a request are
not in them: ``devserver_throughput.py`` and ``devserver_targets.py`` measure the whole server.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))


#: What is measured: a standalone activity's poll + complete, a start, a one-activity workflow.
OPERATIONS = ("activity", "start", "workflow", "serial", "standalone")

#: Operations whose statements are counted, after the timed ones.
_TRACED = 100


def _child(operation: str, count: int, fill: int) -> Dict[str, float]:
    from sync_worker.devserver import control
    from sync_worker.devserver import store as store_module
    from sync_worker.devserver.encoding import encode_body
    from sync_worker.devserver.engine import Config, Engine
    from sync_worker.devserver.queries import QueryBroker
    from sync_worker.devserver.routes import Request, Routes
    from sync_worker.payloads import envelope

    store_module._CHECKPOINT_EVERY_COMMITS = 10 ** 9  # the WAL's growth is the pages written
    directory = tempfile.mkdtemp(prefix="devserver-counts-")
    db = os.path.join(directory, "counts.sqlite")
    args = envelope([])
    result = envelope(None)
    warm = 50
    if operation == "activity":  # queued by another engine, as devserver_targets' fill does
        filler = Engine(Config(), db)
        with filler.lock, filler.tx():
            for _ in range(max(count, fill) + warm + _TRACED):
                control.start_activity(filler, "default", {"activity_type": "noop", "task_queue": "q", "input": args})
        filler.store.close()
    engine = Engine(Config(), db)
    if engine.store._checkpointer is not None:
        engine.store._checkpointer.close()
        engine.store._checkpointer = None
    routes = Routes(engine, QueryBroker(engine))

    def call(path: str, body: Dict[str, Any], plane: str = "worker", method: str = "POST",
             query: Any = None) -> Any:
        handler, params, _ = routes.match(method, path)
        assert handler is not None
        request = Request(method=method, path=path, query=query or {}, headers={}, namespace="default",
                          plane=plane, body=body, params=params)
        with engine.grouped():
            answer = handler(routes, request)[1]
        encode_body(answer)  # the answer's JSON, as the server writes it (after the commit)
        return answer

    call("/api/worker/register", {"worker_id": "w1", "task_queue": "q", "runtime": "python",
                                  "supported_activity_types": ["noop"], "supported_workflow_types": ["t"]})

    def poll(kind: str) -> Any:
        return call(f"/api/worker/{kind}-tasks/poll", {"worker_id": "w1", "task_queue": "q", "timeout_seconds": 0,
                                                       "poll_request_id": f"{kind}-poll-{uuid.uuid4().hex}"})["task"]

    def activity() -> None:
        task = poll("activity")
        call(f"/api/worker/activity-tasks/{task['task_id']}/complete",
             {"activity_attempt_id": task["activity_attempt_id"], "lease_owner": "w1", "result": result})

    def workflow_task(commands: List[Dict[str, Any]]) -> None:
        task = poll("workflow")
        call(f"/api/worker/workflow-tasks/{task['task_id']}/complete",
             {"lease_owner": "w1", "workflow_task_attempt": task["workflow_task_attempt"], "commands": commands})

    def one(n: int) -> None:
        if operation == "activity":
            activity()
        elif operation == "standalone":  # a Celery task: .delay(), the worker's poll + complete, the result's read
            task_id = f"celery-{n}-{uuid.uuid4().hex}"
            call("/api/activities", {"activity_type": "noop", "task_queue": "q", "activity_id": task_id,
                                     "input": envelope([time.time()]),
                                     "retry_policy": {"max_attempts": None, "backoff_seconds": [1],
                                                      "non_retryable_error_types": []},
                                     "start_to_close_timeout_seconds": 86400, "heartbeat_timeout_seconds": 30},
                 plane="control")
            activity()
            described = call(f"/api/activities/{task_id}", {}, plane="control", method="GET")
            assert described["status"] == "completed", described
        elif operation in ("workflow", "serial"):  # what a worker's one-activity workflow asks of the server
            started = call("/api/workflows", {"workflow_id": f"flow-{n}", "workflow_type": "t", "task_queue": "q",
                                    "input": args, "run_timeout_seconds": 600, "execution_timeout_seconds": 3600},
                 plane="control")
            workflow_task([{"type": "schedule_activity", "activity_type": "noop", "arguments": args,
                            "start_to_close_timeout": 30}])
            activity()
            workflow_task([{"type": "complete_workflow", "result": result}])
            if operation == "serial":  # the client's result read (Client.get_result's first history read)
                call(f"/api/workflows/flow-{n}/runs/{started['run_id']}/history", {}, plane="control",
                     method="GET", query={"wait_new_event": "1", "page_size": "1000"})
        else:
            call("/api/workflows", {"workflow_id": f"wf-{n}", "workflow_type": "t", "task_queue": "nobody",
                                    "input": args, "run_timeout_seconds": 600, "execution_timeout_seconds": 3600},
                 plane="control")

    for n in range(warm):
        one(-1 - n)
    conn = engine.store._conn
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    started = time.process_time()
    for n in range(count):
        one(n)
    cpu = time.process_time() - started
    page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    wal = os.path.getsize(db + "-wal")
    # Statements counted over further operations: the trace callback expands every statement's SQL
    # with its bound values, work that is the bench's, not the server's (it is outside the timing).
    statements = [0]
    conn.set_trace_callback(lambda _sql: statements.__setitem__(0, statements[0] + 1))
    for n in range(count, count + _TRACED):
        one(n)
    conn.set_trace_callback(None)
    # Not closed: the last connection's checkpoint would copy the WAL into the file, work that grows
    # with the operations run (the caller exits at once); the files go with their directory.
    shutil.rmtree(directory, ignore_errors=True)
    return {"statements": statements[0] / _TRACED, "wal_pages": (wal - 32) / (page_size + 24) / count,
            "cpu_ms": 1000 * cpu / count}


def _env(tree: str) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = (tree or os.path.dirname(HERE)) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _measure(tree: str, operation: str, count: int) -> Dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "_child", operation, str(count), str(count)], env=_env(tree),
                         check=True, capture_output=True, text=True).stdout
    figures: Dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return figures


def _instructions(tree: str, operation: str, count: int, fill: int) -> int:
    out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                          sys.executable, __file__, "_child", operation, str(count), str(fill)],
                         env=_env(tree), capture_output=True, text=True, timeout=3600)
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind:\n{out.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def _per_operation(tree: str, operation: str, small: int, large: int) -> float:
    """User-space instructions per operation: ``large`` minus ``small`` operations on the same fill."""
    more, fewer = _instructions(tree, operation, large, large), _instructions(tree, operation, small, large)
    return (more - fewer) / (large - small)


def _count_instructions(trees: List[Any], rounds: int, small: int, large: int, operations: List[str]) -> None:
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed")
    got: Dict[str, List[float]] = {}
    for round_no in range(rounds):
        for label, tree in trees:
            for operation in operations:
                figure = _per_operation(tree, operation, small, large)
                got.setdefault(f"{label} {operation}", []).append(figure)
                print(f"round {round_no + 1} {label:6} {operation:8}: {figure:,.0f} instructions", flush=True)
    print(f"\nuser-space instructions per poll + complete (activity), per start, per one-activity workflow "
          f"(serial: and its result read), per Celery task (standalone: start, poll, complete, describe), "
          f"{large} - {small} operations")
    for key, values in got.items():
        print(f"  {key:16} {min(values):,.0f}..{max(values):,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--count", type=int, default=1500, help="activities (and starts) measured per round")
    parser.add_argument("--baseline", default="", help="a directory holding another tree's sync_worker")
    parser.add_argument("--instructions", action="store_true", help="count instructions under valgrind instead")
    parser.add_argument("--small", type=int, default=100, help="with --instructions: the smaller run")
    parser.add_argument("--large", type=int, default=400, help="with --instructions: the larger run")
    parser.add_argument("--operations", default=",".join(OPERATIONS), help="which operations to measure")
    args = parser.parse_args()
    operations = [op for op in args.operations.split(",") if op]
    for op in operations:
        if op not in OPERATIONS:
            parser.error(f"unknown operation {op!r} (one of {', '.join(OPERATIONS)})")
    trees = [("ours", "")] + ([("before", os.path.abspath(args.baseline))] if args.baseline else [])
    if args.instructions:
        _count_instructions(trees, args.rounds, args.small, args.large, operations)
        return
    got: Dict[str, List[Dict[str, float]]] = {}
    for round_no in range(args.rounds):
        for label, tree in trees:
            for operation in operations:
                figures = _measure(tree, operation, args.count)
                got.setdefault(f"{label} {operation}", []).append(figures)
                print(f"round {round_no + 1} {label:6} {operation:8}: {figures['statements']:.1f} statements, "
                      f"{figures['wal_pages']:.2f} WAL pages, {figures['cpu_ms']:.3f} ms CPU", flush=True)
    print("\nper poll + complete (activity), per start with timeouts, per one-activity workflow (serial: and its "
          "result read), per Celery task (standalone), in process; CPU min..max over the rounds")
    for key, rows in got.items():
        cpu = [r["cpu_ms"] for r in rows]
        print(f"  {key:16} {rows[-1]['statements']:5.1f} statements  {rows[-1]['wal_pages']:6.2f} WAL pages  "
              f"{min(cpu):.3f}..{max(cpu):.3f} ms CPU")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        print(json.dumps(_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))), flush=True)
        os._exit(0)  # no interpreter shutdown, no checkpoint at close (see _child)
    else:
        main()
