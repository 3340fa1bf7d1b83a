"""The Python-authored workflows the interop tests run, for our WorkflowWorker and the control.

``install(register, step_failed, step_group)`` registers them with either SDK: ``register(name)``
returns a decorator for a workflow function, ``step_failed`` is the SDK's StepFailed. The
published split ``WorkflowWorker`` sends its own group as a called step's partition unless told
otherwise, so the control passes ``step_group="default"`` (the bare step queue) explicitly, where
ours leaves it out and gets the same by default.

What must outlive a killed worker, or count how often code ran across turns, is written to files
under ``input["dir"]`` (so both SDKs see the same).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Optional

GROUP = "py-workflows"
#: Every workflow the tests start; the engine routes each to GROUP (``engine.remote``).
NAMES = ("wf.mixed", "wf.replay", "wf.sleep", "wf.signal", "wf.parent", "wf.failing", "wf.changing",
         "wf.killed")


def _count(directory: str, key: str) -> int:
    """Append one line to ``<dir>/<key>.count``; the number of lines so far."""
    path = Path(directory) / f"{key}.count"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()}\n")
    return len(path.read_text(encoding="utf-8").splitlines())


def install(register: Callable[[str], Callable[[Any], Any]], step_failed: Any,
            step_group: Optional[str] = None) -> None:
    def step(ctx: Any, name: str, data: Any) -> Any:
        if step_group is None:
            return ctx.step(name, data)
        return ctx.step(name, data, group=step_group)

    @register("wf.mixed")
    def mixed(ctx: Any, data: Dict[str, Any]) -> Dict[str, Any]:
        greeting = step(ctx, "ts.greet", {"name": data["name"]})  # a TypeScript step (the engine serves it)
        charge = step(ctx, "payments.charge-card", {"amount": data["amount"]})  # a Python step
        return {"greeting": greeting, "charge": charge}

    @register("wf.replay")
    def replay(ctx: Any, data: Dict[str, Any]) -> Dict[str, Any]:
        _count(data["dir"], "turns")  # not deterministic on purpose: counts the replays
        started = ctx.now()
        token = ctx.side_effect(lambda: f"{_count(data['dir'], 'side-effect')}-{uuid.uuid4().hex}")
        ctx.sleep(50)
        charge = step(ctx, "payments.charge-card", {"amount": 3})
        return {"startedAt": started, "token": token, "charge": charge}

    @register("wf.sleep")
    def sleep(ctx: Any, data: Dict[str, Any]) -> Dict[str, Any]:
        before = ctx.now()
        ctx.sleep(data["ms"])
        after = ctx.now()
        return {"sleptMs": after - before}

    @register("wf.signal")
    def signal(ctx: Any, data: Dict[str, Any]) -> Dict[str, Any]:
        payload = ctx.wait_signal(data["token"])
        return {"approved": payload}

    @register("wf.parent")
    def parent(ctx: Any, data: Dict[str, Any]) -> Dict[str, Any]:
        child = ctx.start_child("wf.child", {"n": data["n"]})
        return {"child": child}

    @register("wf.child")
    def child(ctx: Any, data: Dict[str, Any]) -> Dict[str, Any]:
        charge = step(ctx, "payments.charge-card", {"amount": data["n"] * 2})
        return {"doubled": data["n"] * 2, "charge": charge}

    @register("wf.failing")
    def failing(ctx: Any, data: Dict[str, Any]) -> Dict[str, Any]:
        try:
            step(ctx, "payments.declined", {"amount": 7, "dir": data["dir"]})
        except step_failed as failure:
            error = failure.error
            return {"caught": error.get("message"), "code": error.get("code"), "details": error.get("details")}
        return {"caught": None}

    @register("wf.changing")
    def changing(ctx: Any, data: Dict[str, Any]) -> Any:
        # The "deploy": the file says which version of the code this replay is.
        variant = (Path(data["dir"]) / "variant").read_text(encoding="utf-8").strip()
        if variant == "1":
            step(ctx, "payments.charge-card", {"amount": 1})
        else:
            ctx.sleep(10)  # version 2 sleeps where version 1 called a step
        return {"approved": ctx.wait_signal(data["token"])}

    @register("wf.killed")
    def killed(ctx: Any, data: Dict[str, Any]) -> Dict[str, Any]:
        def slow_once() -> int:
            starts = _count(data["dir"], "slow-side-effect")
            if starts == 1:  # the first process is SIGKILLed in here
                (Path(data["dir"]) / "turn.running").write_text(str(os.getpid()), encoding="utf-8")
                time.sleep(120)
            return starts

        starts = ctx.side_effect(slow_once)
        charge = step(ctx, "payments.charge-card", {"amount": 5})
        return {"sideEffectStarts": starts, "charge": charge}
