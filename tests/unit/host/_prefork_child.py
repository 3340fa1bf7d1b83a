"""A process running a :class:`~sync_worker.host.prefork.PreforkPool` over fake runtimes, for
test_prefork_pool.py's signals: ``python -m tests.unit.host._prefork_child SCENARIO``.

Each child prints ``RUN <tag> <pid>`` when its runtime runs and ``STOP <tag> <cold>`` when it is
stopped; the parent's log lines go to stdout too; the process exits with the pool's code.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, Callable, Dict

from sync_worker.host.prefork import ChildSpec, PreforkPool, Recycler

from .fakes import FakeRuntime


def _say(line: str) -> None:
    """One write per line: the children share the pipe, and print() may write a line in two parts."""
    os.write(1, f"{line}\n".encode())


class PrintingRuntime(FakeRuntime):
    def __init__(self, tag: str, **kwargs: Any) -> None:
        super().__init__(f"fake-{tag}", **kwargs)
        self.tag = tag

    def run(self) -> None:
        _say(f"RUN {self.tag} {os.getpid()}")
        super().run()

    def stop(self, *, cold: bool = False) -> None:
        _say(f"STOP {self.tag} {cold}")
        super().stop(cold=cold)


def _ok(spec: ChildSpec, recycler: Recycler) -> Any:
    return PrintingRuntime(spec.tag)


def _build_fails(spec: ChildSpec, recycler: Recycler) -> Any:
    raise RuntimeError("cannot build the worker")


def _incomplete(spec: ChildSpec, recycler: Recycler) -> Any:
    return PrintingRuntime(spec.tag, running=["act-1"], drain_seconds=0.2)


def _slow(spec: ChildSpec, recycler: Recycler) -> Any:
    return PrintingRuntime(spec.tag, running=["act-1"], drain_seconds=120)


def _slow_build(spec: ChildSpec, recycler: Recycler) -> Any:
    time.sleep(3)  # importing a big app, opening what the worker needs
    return PrintingRuntime(spec.tag)


SCENARIOS: Dict[str, Callable[[ChildSpec, Recycler], Any]] = {
    "ok": _ok, "build-fails": _build_fails, "incomplete": _incomplete, "slow-drain": _slow, "slow-build": _slow_build}


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s: %(message)s")
    pool = PreforkPool(SCENARIOS[sys.argv[1]], processes=2, workflows=True, shutdown_timeout=30, health_port=0)
    code = pool.serve()
    print(f"EXIT {code}", flush=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
