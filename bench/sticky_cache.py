"""CPU per workflow step as a run grows: cold replay vs the sticky cache (and the published SDK).

    python3 bench/sticky_cache.py                    # N = 50, 200, 1000; 3 rounds (about 2 minutes)
    python3 bench/sticky_cache.py --sizes 50,200 --rounds 1 --no-sdk

One run of N sequential activity steps is driven task by task in this process, the way the
dev server feeds it: after each task the history gains the step's ``ActivityScheduled`` and
``ActivityCompleted`` events (event-level sequences, Avro results, dev-server shapes). Each
task's poll body is JSON-encoded up front; what is timed (``time.process_time``) is what the
worker does with it: decode the body, replay, encode the completion's commands.

* ``off``: sync_worker without the cache: every task carries and replays the whole history.
* ``on``: sync_worker with ``sticky_cache_capacity > 0``: the task carries only the events
  after the cached sequence (the dev server's sticky hit) and the suspended run is resumed.
* ``sdk``: the published SDK's replayer (``durable_workflow.workflow.replay``) over the whole
  history each task -- its sticky cache keeps history, not instances, so it replays it all.

Printed per mode and N: CPU per step (min / median / max over rounds), then the growth
exponent k of total CPU ~ N^k fitted on the medians (k = 1: flat per-step cost; k = 2: O(N^2)).
The target for ``on`` is k <= 1.1.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sync_worker import payloads, workflow
from sync_worker.worker.sticky import StickyWorkflowCache, run_sticky_task
from sync_worker.workflow import WorkflowRegistry, execute_workflow_task

NAME = "bench.sticky.steps"


@workflow.defn(name=NAME)
class Steps:
    def run(self, ctx: Any, count: int) -> Any:
        total = 0
        for step in range(count):
            total = yield ctx.schedule_activity("bench.add", [total, step])
        return total


def _sdk_class() -> Any:
    from durable_workflow import workflow as sdk_workflow

    @sdk_workflow.defn(name=NAME)
    class SdkSteps:
        def run(self, ctx: Any, count: int) -> Any:
            total = 0
            for step in range(count):
                total = yield ctx.schedule_activity("bench.add", [total, step])
            return total

    return SdkSteps


def _event(sequence: int, kind: str, payload: Dict[str, Any]) -> Dict[str, Any]:
    return {"id": f"run-1-e{sequence}", "sequence": sequence, "event_type": kind,
            "recorded_at": "2026-01-01T00:00:00.000000Z", "payload": payload}


def _step_events(start: int, step: int, total: int) -> List[Dict[str, Any]]:
    common = {"sequence": step, "activity_type": "bench.add", "activity_execution_id": f"act-{step}",
              "task_queue": "bench"}
    return [_event(start, "ActivityScheduled", {**common, "arguments": payloads.envelope([total, step - 1])}),
            _event(start + 1, "ActivityCompleted", {**common, "result": payloads.envelope(total + step - 1),
                                                    "payload_codec": "avro"})]


def _task(count: int) -> Dict[str, Any]:
    return {"task_id": "task-1", "workflow_task_attempt": 1, "workflow_type": NAME, "workflow_id": "wf-1",
            "run_id": "run-1", "payload_codec": "avro", "arguments": payloads.envelope([count])}


def _drive(count: int, mode: str, sdk_cls: Any) -> float:
    """CPU seconds the worker spends on every task of one run of ``count`` steps."""
    registry = WorkflowRegistry([Steps])
    cache = StickyWorkflowCache(16, 256 * 1024 * 1024, 3600)
    history = [_event(1, "WorkflowStarted", {"workflow_type": NAME, "arguments": payloads.envelope([count])})]
    sent = 0  # events the cached state has (the server's sticky sequence)
    total, used = 0, 0.0
    for step in range(1, count + 2):
        body = json.dumps({**_task(count), "history_events": history[sent:] if mode == "on" else history})
        begin = time.process_time()
        task = json.loads(body)
        if mode == "sdk":
            from durable_workflow.workflow import replay as sdk_replay

            outcome = sdk_replay(sdk_cls, task["history_events"], [count], workflow_id="wf-1", run_id="run-1",
                                 payload_codec="avro")
            commands: List[Any] = [type(command).__name__ for command in outcome.commands]
        elif mode == "on":
            full = history

            def load(token: Any, task: Dict[str, Any] = task, full: List[Any] = full) -> List[Dict[str, Any]]:
                return list(full) if token is not None else task["history_events"]

            result, entry = run_sticky_task(cache, registry, task, task_queue="bench", load=load)
            if entry is not None:
                cache.keep(entry)
            commands = result.commands
        else:
            commands = execute_workflow_task(registry, task, task["history_events"], task_queue="bench").commands
        json.dumps({"commands": commands})
        used += time.process_time() - begin
        if step <= count:
            sent = len(history)
            history.extend(_step_events(len(history) + 1, step, total))
            total += step - 1
    if mode == "on":
        metrics = cache.metrics()
        assert metrics["hit"] == count and metrics["forced_cold_replay"] == 0, metrics
    return used


def _exponent(sizes: List[int], totals: List[float]) -> float:
    xs, ys = [math.log(n) for n in sizes], [math.log(t) for t in totals]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="50,200,1000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-sdk", action="store_true", help="skip the published SDK's replayer")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    modes = ["off", "on"]
    sdk_cls = None
    if not args.no_sdk:
        try:
            sdk_cls = _sdk_class()
            modes.append("sdk")
        except ImportError:
            print("published SDK (durable-workflow) not installed: skipping the sdk mode")
    results: Dict[str, Dict[int, List[float]]] = {mode: {n: [] for n in sizes} for mode in modes}
    for _ in range(args.rounds):
        for n in sizes:
            for mode in modes:  # alternate within the round
                results[mode][n].append(_drive(n, mode, sdk_cls))
    print(f"sticky_cache: CPU per workflow step (ms, min/median/max of {args.rounds} rounds), one run of N steps")
    run: Callable[[float, int], str] = lambda seconds, n: f"{seconds / (n + 1) * 1000:.3f}"  # noqa: E731
    for mode in modes:
        cells = []
        medians = []
        for n in sizes:
            values = sorted(results[mode][n])
            medians.append(statistics.median(values))
            cells.append(f"N={n}: {run(values[0], n)}/{run(medians[-1], n)}/{run(values[-1], n)}")
        exponent = _exponent(sizes, medians) if len(sizes) > 1 else float("nan")
        label = {"off": "sync_worker, cache off", "on": "sync_worker, sticky cache on",
                 "sdk": "published SDK replay"}[mode]
        print(f"  {label:30s} {'  '.join(cells)}  growth exponent k={exponent:.2f}")
    if "on" in modes and len(sizes) > 1:
        last = sizes[-1]
        on = statistics.median(results["on"][last])
        for other in [mode for mode in modes if mode != "on"]:
            print(f"  at N={last}: cache on uses {statistics.median(results[other][last]) / on:.1f}x less CPU "
                  f"than {other}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
