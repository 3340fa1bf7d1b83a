"""Registering again after ``worker_not_registered``, and never once deregistration has begun.

CI caught a uWSGI web worker whose embedded worker was left ``active`` after a clean exit: a
refusal that raced the deregistration made the worker register again. ``Rejoin.close`` (called by
the source before it deregisters) ends that: later refusals count as empty polls, and a
re-registration already under way finishes first, so the deregistration sees its token.
"""

from __future__ import annotations

import threading
from typing import Any, List

import pytest

from sync_worker.errors import ServerError
from sync_worker.worker.rejoin import Rejoin


class _Registrar:
    worker_id = "w-1"
    task_queue = "q"

    def __init__(self, gate: Any = None) -> None:
        self.calls: List[str] = []
        self.gate = gate
        self.entered = threading.Event()

    def register_again(self) -> None:
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        self.calls.append("register")


def _refused() -> Any:
    raise ServerError(412, {"reason": "worker_not_registered", "message": "Worker must be registered"})


def test_a_refusal_registers_again_once_and_counts_as_an_empty_poll() -> None:
    registrar = _Registrar()
    rejoin = Rejoin(registrar)  # type: ignore[arg-type]
    assert rejoin.guard(_refused)() is None
    assert registrar.calls == ["register"] and rejoin.generation == 1


def test_other_server_errors_still_raise() -> None:
    rejoin = Rejoin(_Registrar())  # type: ignore[arg-type]

    def conflict() -> Any:
        raise ServerError(409, {"reason": "registration_token_mismatch"})

    with pytest.raises(ServerError):
        rejoin.guard(conflict)()


def test_after_close_a_late_refusal_does_not_register_again() -> None:
    registrar = _Registrar()
    rejoin = Rejoin(registrar)  # type: ignore[arg-type]
    rejoin.close()
    for _ in range(3):  # pollers and the heartbeat, each refused once
        assert rejoin.guard(_refused)() is None
    assert registrar.calls == [] and rejoin.generation == 0


def test_close_waits_for_a_registration_under_way() -> None:
    gate = threading.Event()
    registrar = _Registrar(gate)
    rejoin = Rejoin(registrar)  # type: ignore[arg-type]
    poller = threading.Thread(target=rejoin.guard(_refused))
    poller.start()
    assert registrar.entered.wait(10)
    closed = threading.Event()
    closer = threading.Thread(target=lambda: (rejoin.close(), closed.set()))
    closer.start()
    assert not closed.wait(0.2)  # still registering: close must not return before it ends
    gate.set()
    assert closed.wait(10)
    poller.join(10)
    closer.join(10)
    assert registrar.calls == ["register"]
    assert rejoin.guard(_refused)() is None and registrar.calls == ["register"]
