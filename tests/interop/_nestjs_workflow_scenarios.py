"""Python-authored workflows driven by the real engine, run the same way against any worker process.

Each scenario starts a run of one of ``_nestjs_workflows``' workflows on the engine, asserts what it
promises, and returns what the engine recorded (:func:`summary`) with the run- and time-dependent
parts taken out, so ours can be compared with the published ``WorkflowWorker`` (the control).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Dict, List

from ._nestjs_harness import Engine, StepWorkerProcess, wait_for_file


def _run_id(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:10]}"


def start(engine: Engine, workflow: str, data: Any, run_id: str) -> None:
    engine.call("startWorkflow", workflow=workflow, input=data, runId=run_id)


def wait(engine: Engine, run_id: str, timeout: float = 30.0) -> Dict[str, Any]:
    return engine.call("wait", runId=run_id, timeoutMs=int(timeout * 1000), timeout=timeout + 10)


def checkpoints(result: Dict[str, Any], run_id: str) -> List[Any]:
    """(seq, kind, name, status) of each checkpoint, the run id replaced by ``<run>``."""
    return [(cp["seq"], cp["kind"], str(cp["name"]).replace(run_id, "<run>"), cp["status"])
            for cp in result.get("checkpoints") or []]


def summary(result: Dict[str, Any], run_id: str, output: Any = None) -> Dict[str, Any]:
    error = result.get("error") or {}
    return {"status": result.get("status"), "output": output, "error_code": error.get("code"),
            "checkpoints": checkpoints(result, run_id)}


def wait_until_parked(engine: Engine, run_id: str, worker: StepWorkerProcess, *, completed: int = 0,
                      timeout: float = 20.0, steady: float = 0.3) -> None:
    """Until the run is suspended on something other than a turn's decision (a signal, a timer)
    with ``completed`` checkpoints done, and stays so for ``steady`` s: the turn that asked for the
    wait has been applied (a step's completion and the next turn's dispatch leave a gap of a few ms
    where the run looks parked too)."""
    deadline = time.monotonic() + timeout
    parked_since = None
    described: Dict[str, Any] = {}
    while time.monotonic() < deadline:
        described = engine.call("describe", runId=run_id)
        done = sum(1 for cp in described["checkpoints"] if cp["status"] == "completed")
        if described["status"] == "suspended" and described["awaiting"] is None and done >= completed:
            parked_since = parked_since or time.monotonic()
            if time.monotonic() - parked_since >= steady:
                return
        else:
            parked_since = None
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not park: {described}\n{worker.log()[-3000:]}")


def _checkpoint(result: Dict[str, Any], name: str) -> Dict[str, Any]:
    found = [cp for cp in result["checkpoints"] if cp["name"] == name]
    assert found, (name, result["checkpoints"])
    return found[0]


def mixed(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    """A TypeScript step and a Python step from one Python workflow."""
    run_id = _run_id("mixed")
    start(engine, "wf.mixed", {"name": "ada", "amount": 42}, run_id)
    result = wait(engine, run_id)
    assert result["status"] == "completed", (result, worker.log()[-3000:])
    assert result["output"] == {"greeting": {"greeting": "hello ada", "by": "typescript"},
                                "charge": {"chargeId": "ch_42"}}
    assert checkpoints(result, run_id) == [(0, "remote", "ts.greet", "completed"),
                                           (1, "remote", "payments.charge-card", "completed")]
    return summary(result, run_id, result["output"])


def replay(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    """``now`` and ``side_effect`` keep their first values over later turns; the function ran once."""
    run_id = _run_id("replay")
    start(engine, "wf.replay", {"dir": str(workdir)}, run_id)
    result = wait(engine, run_id)
    assert result["status"] == "completed", (result, worker.log()[-3000:])
    output = result["output"]
    turns = (workdir / "turns.count").read_text().count("\n")
    assert turns >= 3, turns  # the sleep and the step each end a turn
    assert (workdir / "side-effect.count").read_text().count("\n") == 1  # ran once over every turn
    assert output["startedAt"] == _checkpoint(result, "now#0")["output"]
    assert output["token"] == _checkpoint(result, "sideEffect")["output"]
    assert output["token"].startswith("1-")
    assert abs(output["startedAt"] - time.time() * 1000) < 60_000
    return summary(result, run_id, {"charge": output["charge"]})


def sleep(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    """A 500 ms durable timer: the engine resumes the run after it, not before."""
    run_id = _run_id("sleep")
    started = time.monotonic()
    start(engine, "wf.sleep", {"ms": 500}, run_id)
    result = wait(engine, run_id)
    assert result["status"] == "completed", (result, worker.log()[-3000:])
    assert result["output"]["sleptMs"] >= 500
    assert time.monotonic() - started >= 0.5
    timer = _checkpoint(result, "sleep:1")
    assert timer["kind"] == "sleep"
    return summary(result, run_id)


def signal(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    """The run waits for a signal until ``engine.signal`` releases it."""
    run_id = _run_id("signal")
    token = f"approve-{run_id}"
    start(engine, "wf.signal", {"token": token}, run_id)
    wait_until_parked(engine, run_id, worker)  # the turn that asked for the signal has been applied
    assert engine.call("describe", runId=run_id)["status"] == "suspended", worker.log()[-3000:]
    engine.call("signal", token=token, payload={"by": "ops", "ok": True})
    result = wait(engine, run_id)
    assert result["status"] == "completed", (result, worker.log()[-3000:])
    assert result["output"] == {"approved": {"by": "ops", "ok": True}}
    return summary(result, run_id, result["output"])


def signal_first(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    """A signal sent before the run exists is buffered by the engine and released at the wait."""
    run_id = _run_id("early")
    token = f"approve-{run_id}"
    engine.call("signal", token=token, payload="early")
    start(engine, "wf.signal", {"token": token}, run_id)
    result = wait(engine, run_id)
    assert result["status"] == "completed", (result, worker.log()[-3000:])
    assert result["output"] == {"approved": "early"}
    return summary(result, run_id, result["output"])


def child(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    """A child run (its own run, ``<runId>.child.<seq>``) whose output the parent returns."""
    run_id = _run_id("parent")
    start(engine, "wf.parent", {"n": 21}, run_id)
    result = wait(engine, run_id)
    assert result["status"] == "completed", (result, worker.log()[-3000:])
    assert result["output"] == {"child": {"doubled": 42, "charge": {"chargeId": "ch_42"}}}
    kid = engine.call("describe", runId=f"{run_id}.child.0")
    assert kid["status"] == "completed" and kid["output"] == result["output"]["child"]
    return summary(result, run_id, result["output"])


def failing(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    """A failing step arrives as StepFailed with the engine's message, code and details."""
    run_id = _run_id("failing")
    start(engine, "wf.failing", {"dir": str(workdir)}, run_id)
    result = wait(engine, run_id)
    assert result["status"] == "completed", (result, worker.log()[-3000:])
    assert result["output"] == {"caught": "card declined", "code": "card_declined", "details": {"amount": 7}}
    return summary(result, run_id, result["output"])


def changing(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    """The workflow's code changes under a run in flight: the next turn fails it as non-deterministic."""
    run_id = _run_id("changing")
    token = f"go-{run_id}"
    (workdir / "variant").write_text("1", encoding="utf-8")
    start(engine, "wf.changing", {"dir": str(workdir), "token": token}, run_id)
    wait_until_parked(engine, run_id, worker, completed=1)  # version 1's step ran; the run waits for the signal
    (workdir / "variant").write_text("2", encoding="utf-8")  # the new deploy
    engine.call("signal", token=token, payload="go")
    result = wait(engine, run_id)
    assert result["status"] == "failed", (result, worker.log()[-3000:])
    assert result["error"]["code"] == "non_determinism", result["error"]
    assert "seq 0" in result["error"]["message"]
    return summary(result, run_id)


def killed(engine: Engine, worker: StepWorkerProcess, workdir: Path) -> Dict[str, Any]:
    """SIGKILL the worker in the middle of a turn; a new worker process replays it and finishes the run."""
    run_id = _run_id("killed")
    start(engine, "wf.killed", {"dir": str(workdir)}, run_id)
    assert wait_for_file(workdir / "turn.running", 30), worker.log()[-3000:]
    worker.kill()
    worker.start()
    result = wait(engine, run_id, timeout=60)
    assert result["status"] == "completed", (result, worker.log()[-3000:])
    # The side effect never recorded a value the first time, so the new process ran it again, once.
    assert result["output"] == {"sideEffectStarts": 2, "charge": {"chargeId": "ch_5"}}
    return summary(result, run_id, result["output"])


SCENARIOS = {"mixed": mixed, "replay": replay, "sleep": sleep, "signal": signal, "signal_first": signal_first,
             "child": child,
             "failing": failing, "changing": changing, "killed": killed}
