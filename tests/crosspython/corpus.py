"""Runs recorded under one CPython replay under every other one we claim (3.9-3.13).

``python corpus.py record FILE`` drives the workflows below through the model of the server
(``tests/unit/workflow/_message_sim``: one message per task, random timings, messages racing
running tasks) and writes each run's history with the commands every task boundary gave under
this interpreter. ``python corpus.py check FILE`` replays each cut under this interpreter and
compares the commands. Fingerprints are left out of the comparison: they hash CPython bytecode,
which is exactly what differs (replay never fails on one, see ``workflow/fingerprints``); the
keys, steps, arguments and results must be equal. ``scripts/suites.d/45-crosspython.sh``
records under each available Python and checks under every other one.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from sync_worker import workflow  # noqa: E402
from sync_worker.workflow import replay  # noqa: E402
from sync_worker.workflow.messages import ResumeContext  # noqa: E402
from tests.unit.workflow._message_sim import Simulation  # noqa: E402

SEEDS = range(12)


@workflow.defn(name="xpy.batch")
class Batch:
    """Batches, a keyed wait, a generator-expression predicate and a frozenset constant."""

    def __init__(self) -> None:
        self.queue: List[Any] = []
        self.stop = False
        self.mode = "run"

    @workflow.signal("push")
    def push(self, item: Any) -> None:
        self.queue.append(item)

    @workflow.signal("stop")
    def finish(self) -> None:
        self.stop = True
        self.mode = "stopping"

    @workflow.update("add")
    def add(self, item: Any) -> int:
        self.queue.append(item)
        return len(self.queue)

    def run(self, ctx: Any) -> Any:
        sent: List[Any] = []
        while True:
            yield ctx.wait_condition(lambda: any(True for _ in self.queue) or self.mode in {"stopping", "x"})
            if self.queue:
                batch, self.queue = self.queue, []
                sent.extend((yield ctx.schedule_activity("echo", [batch])))
                yield ctx.wait_condition(lambda: True, key="checkpoint")
            elif self.stop:
                return sent


@workflow.defn(name="xpy.keyed")
class Keyed(Batch):
    """One item at a time behind a keyed wait with a timer in between."""

    def run(self, ctx: Any) -> Any:
        sent: List[Any] = []
        while True:
            yield ctx.wait_condition(lambda: bool(self.queue) or self.stop, key="items")
            if not self.queue:
                return sent
            sent.extend((yield ctx.schedule_activity("echo", [[self.queue.pop(0)]])))
            yield ctx.sleep(1)


WORKFLOWS = {cls.__name__: cls for cls in (Batch, Keyed)}


def _comparable(commands: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [{key: value for key, value in command.items() if key != "condition_definition_fingerprint"}
            for command in commands]


def _cut_commands(cls: type, events: List[Dict[str, Any]], cut: int) -> List[Dict[str, Any]]:
    result = replay(cls, events[:cut], [], resume=ResumeContext("workflow_history"))
    return _comparable([command.to_wire("q") for command in result.commands])


def record(path: str) -> None:
    runs = []
    for name, cls in WORKFLOWS.items():
        for seed in SEEDS:
            rng = random.Random(seed)
            items = rng.randint(1, 6)
            arrivals = [("update", "add", [item]) if rng.random() < 0.3 else ("signal", "push", [item])
                        for item in range(1, items + 1)] + [("signal", "stop", [])]
            sim = Simulation(cls, rng, sticky=False)
            result = sim.drive(arrivals)
            assert result == list(range(1, items + 1)), (name, seed, result)
            cuts = range(2, len(sim.events) + 1)
            runs.append({"workflow": name, "seed": seed, "events": sim.events,
                         "cuts": {str(cut): _cut_commands(cls, sim.events, cut) for cut in cuts}})
    with open(path, "w") as handle:
        json.dump({"python": sys.version.split()[0], "runs": runs}, handle)
    print(f"recorded {len(runs)} runs under Python {sys.version.split()[0]} into {path}")


def check(path: str) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    with open(path) as handle:
        corpus = json.load(handle)
    failures = 0
    cuts = 0
    for run in corpus["runs"]:
        cls = WORKFLOWS[run["workflow"]]
        for cut, expected in run["cuts"].items():
            cuts += 1
            got = _cut_commands(cls, run["events"], int(cut))
            if got != expected:
                failures += 1
                print(f"{run['workflow']} seed {run['seed']} cut {cut}: recorded under {corpus['python']} "
                      f"{expected}, replayed under {sys.version.split()[0]} {got}", file=sys.stderr)
    print(f"replayed {cuts} cuts of {len(corpus['runs'])} runs recorded under Python {corpus['python']} "
          f"under Python {sys.version.split()[0]}: {failures} differ")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("record", "check"):
        print("usage: corpus.py record|check FILE", file=sys.stderr)
        sys.exit(2)
    if sys.argv[1] == "record":
        record(sys.argv[2])
        sys.exit(0)
    sys.exit(check(sys.argv[2]))
