"""A process running ``sync_worker.host.serve`` over fake runtimes, for test_serve.py's signals.

``python -m tests.unit.host._serve_child SCENARIO``: prints ``READY`` once every runtime runs,
then, when serve returns, ``STOPS <id>=<cold flags>`` per runtime and ``WAKEUPS <n>`` (how often
the foreground's ``select`` returned), and exits with serve's code.
"""

from __future__ import annotations

import logging
import select
import sys
import threading
from typing import Any, Callable, Dict, List, Tuple

from sync_worker.host import WorkerGroup, serve

from .fakes import FakeRuntime

SCENARIOS: Dict[str, Callable[[], Tuple[Any, List[FakeRuntime]]]] = {}


def scenario(name: str) -> Callable[[Callable[[], List[FakeRuntime]]], None]:
    def register(build: Callable[[], List[FakeRuntime]]) -> None:
        def make() -> Tuple[Any, List[FakeRuntime]]:
            runtimes = build()
            target: Any = runtimes[0] if len(runtimes) == 1 else WorkerGroup(runtimes)
            return target, runtimes
        SCENARIOS[name] = make
    return register


@scenario("drains")
def _drains() -> List[FakeRuntime]:
    return [FakeRuntime("a", running=["act-1"])]  # the running activity finishes within the drain


@scenario("slow-drain")
def _slow_drain() -> List[FakeRuntime]:
    return [FakeRuntime("a", running=["act-1"], drain_seconds=120)]


@scenario("incomplete")
def _incomplete() -> List[FakeRuntime]:
    return [FakeRuntime("a", running=["act-1"], drain_seconds=0.2)]


@scenario("fails")
def _fails() -> List[FakeRuntime]:
    return [FakeRuntime("a", fail_after=0.5)]


@scenario("group")
def _group() -> List[FakeRuntime]:
    return [FakeRuntime("a"), FakeRuntime("b", running=["act-2"])]


@scenario("group-fails")
def _group_fails() -> List[FakeRuntime]:
    return [FakeRuntime("a"), FakeRuntime("b", fail_after=0.5)]


def main(name: str) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stdout)
    wakeups = [0]
    real_select = select.select

    def counting_select(*args: Any, **kwargs: Any) -> Any:
        wakeups[0] += 1
        return real_select(*args, **kwargs)

    select.select = counting_select  # type: ignore[assignment]
    target, runtimes = SCENARIOS[name]()

    def announce() -> None:
        for runtime in runtimes:
            runtime.started.wait()
        print("READY", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    code = serve(target)
    for runtime in runtimes:
        print(f"STOPS {runtime.worker_id}={runtime.stops}", flush=True)
    print(f"WAKEUPS {wakeups[0]}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
