"""CPU per workflow step as a run grows: cold replay vs the sticky cache (and the published SDK).

    python3 bench/sticky_cache.py                    # N = 50, 200, 1000; 3 rounds (about 5 minutes)
    python3 bench/sticky_cache.py --sizes 50,200 --rounds 1 --no-sdk --shapes steps,gated
    python3 bench/sticky_cache.py --modes on --rounds 5    # the cache alone (seconds)

One run of N steps is driven task by task in this process, the way the dev server feeds it:
a small in-process server (``_Server``) turns each task's commands into dev-server events
(event-level sequences, Avro results, the same payload shapes), then adds what wakes the run.
Each task's poll body is JSON-encoded up front; what is timed (``time.process_time``) is what
the worker does with it: decode the body, replay, encode the completion's commands.

Run shapes (``--shapes``):

* ``steps``: N sequential activities (one task a step).
* ``gated``: each step waits on a condition (``wait_condition``) that a signal releases, then
  runs an activity (two tasks a step: the signal, the activity; the dev server records
  ``ConditionWaitSatisfied`` in the completion that moves on).
* ``parallel``: each step is a parallel group of two activities that complete in reverse
  order (two tasks a step: the partly resolved group is re-emitted, then the full one).

Modes:

* ``off``: sync_worker without the cache: every task carries and replays the whole history.
* ``on``: sync_worker with its default settings (the cache is on by default): the task carries only the events
  after the cached sequence (the dev server's sticky hit) and the suspended run is resumed.
* ``sdk``: the published SDK's replayer (``durable_workflow.workflow.replay``) over the whole
  history each task -- its sticky cache keeps history, not instances, so it replays it all.

Printed per shape, mode and N: CPU per step (min / median / max over rounds), then the growth
exponent k of total CPU ~ N^k fitted on the medians (k = 1: flat per-step cost; k = 2: O(N^2)).
The target for ``on`` is k <= 1.1 for every shape.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sync_worker import payloads, workflow
from sync_worker.worker.sticky import StickyWorkflowCache, run_sticky_task
from sync_worker.workflow import WorkflowRegistry, execute_workflow_task

NAMES = {"steps": "bench.sticky.steps", "gated": "bench.sticky.gated", "parallel": "bench.sticky.parallel"}


def _classes(wf: Any) -> Dict[str, type]:
    """The same workflow source for either SDK's ``workflow`` module."""

    @wf.defn(name=NAMES["steps"])
    class Steps:
        def run(self, ctx: Any, count: int) -> Any:
            total = 0
            for step in range(count):
                total = yield ctx.schedule_activity("bench.add", [total, step])
            return total

    @wf.defn(name=NAMES["gated"])
    class Gated:
        def __init__(self) -> None:
            self.released = 0

        @wf.signal("release")
        def release(self) -> None:
            self.released += 1

        def run(self, ctx: Any, count: int) -> Any:
            total = 0
            for step in range(count):
                yield ctx.wait_condition(lambda step=step: self.released > step, key="gate")
                total = yield ctx.schedule_activity("bench.add", [total, step])
            return total

    @wf.defn(name=NAMES["parallel"])
    class Parallel:
        def run(self, ctx: Any, count: int) -> Any:
            total = 0
            for step in range(count):
                left, right = yield [ctx.schedule_activity("bench.add", [total, step]),
                                     ctx.schedule_activity("bench.add", [total, step])]
                total = left + right - total
            return total

    return {"steps": Steps, "gated": Gated, "parallel": Parallel}


OURS = _classes(workflow)


def _sdk_classes() -> Dict[str, type]:
    from durable_workflow import workflow as sdk_workflow

    return _classes(sdk_workflow)


class _Server:
    """Records one run's history from its commands, in dev-server shapes, and wakes it."""

    def __init__(self, shape: str, count: int) -> None:
        self.shape, self.count = shape, count
        self.history: List[Dict[str, Any]] = []
        self.sequence = 0
        self.open_wait: Optional[Dict[str, Any]] = None
        self.open_activities: List[Dict[str, Any]] = []  # scheduled, not completed (payloads)
        self.members: set = set()
        self.closed = False
        self._append("WorkflowStarted", {"workflow_type": NAMES[shape], "arguments": payloads.envelope([count])})

    def _append(self, kind: str, payload: Dict[str, Any]) -> None:
        number = len(self.history) + 1
        self.history.append({"id": f"run-1-e{number}", "sequence": number, "event_type": kind,
                             "recorded_at": "2026-01-01T00:00:00.000000Z", "payload": payload})

    def complete(self, commands: List[Dict[str, Any]]) -> None:
        """Record a workflow task's commands (the completion), then what wakes the run next."""
        if self.open_wait is not None and not any(c["type"] == "open_condition_wait" for c in commands):
            self._append("ConditionWaitSatisfied", dict(self.open_wait))
            self.open_wait = None
        for command in commands:
            kind = command["type"]
            group = {k: v for k, v in command.items() if k.startswith("parallel_group_")}
            if kind == "schedule_activity":
                member = f"{command.get('parallel_group_id')}#{command.get('parallel_group_index')}"
                if group and member in self.members:
                    continue  # a re-emitted member of a partly resolved group
                self.members.add(member)
                self.sequence += 1
                payload = {"sequence": self.sequence, "activity_type": command["activity_type"],
                           "activity_execution_id": f"act-{self.sequence}", "task_queue": "bench", **group}
                self._append("ActivityScheduled", {**payload, "arguments": command.get("arguments")})
                self.open_activities.append(payload)
            elif kind == "open_condition_wait":
                self.sequence += 1
                self.open_wait = {"condition_wait_id": f"wait-{self.sequence}", "sequence": self.sequence,
                                  **{k: command[k] for k in ("condition_key", "condition_definition_fingerprint")
                                     if k in command}}
                self._append("ConditionWaitOpened", dict(self.open_wait))
            elif kind == "complete_workflow":
                self.closed = True
                return
            else:
                raise AssertionError(f"unexpected command {command}")
        if self.open_wait is not None:
            self._append("SignalReceived", {"signal_name": "release", "value": payloads.envelope([])})
        elif self.open_activities:
            # The last one scheduled completes first (a group's members in reverse order).
            payload = self.open_activities.pop()
            arguments = payloads.decode_envelope(_arguments(self.history, payload["sequence"]))
            self._append("ActivityCompleted", {**payload, "result": payloads.envelope(sum(arguments)),
                                               "payload_codec": "avro"})


def _arguments(history: List[Dict[str, Any]], sequence: int) -> Any:
    for event in reversed(history):
        if event["event_type"] == "ActivityScheduled" and event["payload"]["sequence"] == sequence:
            return event["payload"]["arguments"]
    raise AssertionError(sequence)


def _task(shape: str, count: int) -> Dict[str, Any]:
    return {"task_id": "task-1", "workflow_task_attempt": 1, "workflow_type": NAMES[shape], "workflow_id": "wf-1",
            "run_id": "run-1", "payload_codec": "avro", "arguments": payloads.envelope([count])}


def _drive(shape: str, count: int, mode: str, sdk_classes: Optional[Dict[str, type]]) -> float:
    """CPU seconds the worker spends on every task of one run of ``count`` steps."""
    registry = WorkflowRegistry([OURS[shape]])
    cache = StickyWorkflowCache(None)  # the Worker's defaults (on, 500 runs, 16 MiB, 300 s: issue 29)
    server = _Server(shape, count)
    sent = 0  # events the cached state has (the server's sticky sequence)
    used, tasks = 0.0, 0
    while not server.closed:
        history = server.history
        body = json.dumps({**_task(shape, count), "history_events": history[sent:] if mode == "on" else history})
        begin = time.process_time()
        task = json.loads(body)
        if mode == "sdk":
            from durable_workflow.workflow import commands_to_server_commands
            from durable_workflow.workflow import replay as sdk_replay

            assert sdk_classes is not None
            outcome = sdk_replay(sdk_classes[shape], task["history_events"], [count], workflow_id="wf-1",
                                 run_id="run-1", payload_codec="avro")
            commands: List[Any] = commands_to_server_commands(outcome.commands, "bench")
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
        tasks += 1
        sent = len(history)
        server.complete(commands)
    if mode == "on":
        metrics = cache.metrics()
        assert metrics["hit"] == tasks - 1 and metrics["forced_cold_replay"] == 0, (shape, metrics)
    return used


def _exponent(sizes: List[int], totals: List[float]) -> float:
    xs, ys = [math.log(n) for n in sizes], [math.log(t) for t in totals]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="50,200,1000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", default="steps,gated,parallel", help="comma-separated: " + ", ".join(NAMES))
    parser.add_argument("--modes", default="off,on,sdk", help="comma-separated: off, on, sdk")
    parser.add_argument("--no-sdk", action="store_true", help="skip the published SDK's replayer")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    shapes = [shape for shape in args.shapes.split(",") if shape]
    unknown = [shape for shape in shapes if shape not in NAMES]
    if unknown:
        parser.error(f"unknown shape(s) {unknown}; choose from {list(NAMES)}")
    modes = [mode for mode in ("off", "on") if mode in args.modes.split(",")]
    sdk_classes = None
    if not args.no_sdk and "sdk" in args.modes.split(","):
        try:
            sdk_classes = _sdk_classes()
            modes.append("sdk")
        except ImportError:
            print("published SDK (durable-workflow) not installed: skipping the sdk mode")
    results: Dict[str, Dict[str, Dict[int, List[float]]]] = {
        shape: {mode: {n: [] for n in sizes} for mode in modes} for shape in shapes}
    from _noise import NoiseProbe

    noise = NoiseProbe()
    for _ in range(args.rounds):
        noise.sample(3)
        for n in sizes:
            for shape in shapes:
                for mode in modes:  # alternate within the round
                    results[shape][mode][n].append(_drive(shape, n, mode, sdk_classes))
    noise.sample(3)
    print(f"sticky_cache: CPU per workflow step (ms, min/median/max of {args.rounds} rounds), one run of N steps")
    print(noise.report())
    run: Callable[[float, int], str] = lambda seconds, n: f"{seconds / (n + 1) * 1000:.3f}"  # noqa: E731
    labels = {"off": "sync_worker, cache off", "on": "sync_worker, sticky cache on", "sdk": "published SDK replay"}
    for shape in shapes:
        print(f" shape {shape}:")
        for mode in modes:
            cells = []
            medians = []
            for n in sizes:
                values = sorted(results[shape][mode][n])
                medians.append(statistics.median(values))
                cells.append(f"N={n}: {run(values[0], n)}/{run(medians[-1], n)}/{run(values[-1], n)}")
            exponent = _exponent(sizes, medians) if len(sizes) > 1 else float("nan")
            print(f"  {labels[mode]:30s} {'  '.join(cells)}  growth exponent k={exponent:.2f}")
        if "on" in modes and len(sizes) > 1:
            last = sizes[-1]
            on = statistics.median(results[shape]["on"][last])
            for other in [mode for mode in modes if mode != "on"]:
                print(f"  at N={last}: cache on uses {statistics.median(results[shape][other][last]) / on:.1f}x "
                      f"less CPU than {other}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
