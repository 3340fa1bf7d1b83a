"""The steps the nestjs-durable interop tests and the bench run, for our worker and the control.

``install(register, fatal, sep)`` registers them with any SDK: ``register(name)`` returns a decorator
for a plain function, ``fatal`` is the SDK's FatalError. State that must survive a worker being
killed (how often a step started) lives in files under ``input["dir"]``, so both SDKs see the same.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Dict


def _starts(data: Dict[str, Any], key: str) -> int:
    """Record one start of ``key`` in ``data["dir"]``; how many starts there have been."""
    path = Path(data["dir"]) / f"{key}.starts"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()}\n")
    return len(path.read_text(encoding="utf-8").splitlines())


def install(register: Callable[[str], Callable[[Any], Any]], fatal: Any, sep: str = ".") -> None:
    """``sep`` joins the name parts: ``.`` as the engine's examples, ``-`` for SQS (no dots in queue names)."""
    original = register

    def register(name: str) -> Callable[[Any], Any]:  # type: ignore[no-redef]
        return original(name.replace(".", sep))

    @register("payments.charge-card")
    def charge(data: Dict[str, Any]) -> Dict[str, Any]:
        return {"chargeId": f"ch_{data['amount']}"}

    @register("payments.declined")
    def declined(data: Dict[str, Any]) -> None:
        _starts(data, "declined")
        raise fatal("card declined", code="card_declined", details={"amount": data.get("amount")})

    @register("payments.flaky")
    def flaky(data: Dict[str, Any]) -> Dict[str, Any]:
        starts = _starts(data, "flaky")
        if starts == 1:
            raise RuntimeError("gateway timeout")
        return {"chargeId": "ch_retry", "starts": starts}

    @register("payments.slow")
    def slow(data: Dict[str, Any]) -> Dict[str, Any]:
        starts = _starts(data, "slow")
        if starts == 1:  # the first run is the one the test kills
            (Path(data["dir"]) / "slow.running").write_text(str(os.getpid()), encoding="utf-8")
            time.sleep(float(data.get("seconds", 120)))
        return {"done": True, "starts": starts}

    @register("payments.progress")
    def progress(data: Dict[str, Any], ctx: Any) -> Dict[str, Any]:
        # ours: ctx.progress (streamed live); the published SDK streams every step event (ctx.info)
        report = getattr(ctx, "progress", None) or ctx.info
        for i in range(int(data.get("count", 3))):
            report(f"batch {i + 1}", {"done": i + 1})
            time.sleep(0.05)
        return {"reported": int(data.get("count", 3))}

    @register("bench.echo")
    def echo(data: Dict[str, Any]) -> Dict[str, Any]:
        return {"i": data.get("i")}

    @register("bench.sleep")
    def nap(data: Dict[str, Any]) -> Dict[str, Any]:
        time.sleep(float(data.get("ms", 10)) / 1000.0)  # an I/O wait (a gateway call)
        return {"i": data.get("i")}
