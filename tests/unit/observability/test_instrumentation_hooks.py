"""The process-wide hooks integrations install (sync_worker.instrumentation), without any server."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from sync_worker import instrumentation
from sync_worker.instrumentation import ClientCall
from sync_worker.interceptors import PassthroughWorkerInterceptor


class Recorder:
    def __init__(self, name: str, log: List[str]) -> None:
        self.name, self.log = name, log

    def hook(self, call: ClientCall, next: Any) -> Any:
        self.log.append(f"{self.name}:{call.operation}")
        return next(call)

    def execute_step(self, task: Any, next: Any) -> Dict[str, Any]:
        self.log.append(f"{self.name}:step")
        return next({**task, "seen_by": self.name})


def test_client_hooks_nest_first_installed_outermost_and_may_change_the_body() -> None:
    log: List[str] = []
    outer, inner = Recorder("outer", log), Recorder("inner", log)

    def add_field(call: ClientCall, next: Any) -> Any:
        import dataclasses
        return next(dataclasses.replace(call, body={**call.body, "added": True}))

    for hook in (outer.hook, inner.hook, add_field):
        instrumentation.install_client_hook(hook)
    instrumentation.install_client_hook(outer.hook)  # a bound method again: still installed once
    try:
        sent = instrumentation.observe_client_call(ClientCall("workflow.start", "wf", {"a": 1}),
                                                   lambda call: dict(call.body))
    finally:
        for hook in (outer.hook, inner.hook, add_field):
            instrumentation.uninstall(hook)
    assert sent == {"a": 1, "added": True} and log == ["outer:workflow.start", "inner:workflow.start"]
    assert instrumentation.observe_client_call(ClientCall("workflow.start", "wf", {}), lambda c: "plain") == "plain"


def test_step_interceptors_wrap_the_core_and_worker_interceptors_are_checked() -> None:
    log: List[str] = []
    step = Recorder("s", log)
    instrumentation.install_step_interceptor(step)
    try:
        assert instrumentation.run_step({"name": "x"}, lambda task: {"status": "completed", **task}) == {
            "status": "completed", "name": "x", "seen_by": "s"}
    finally:
        instrumentation.uninstall(step)
    assert instrumentation.step_interceptors() == ()
    with pytest.raises(TypeError):
        instrumentation.install_step_interceptor(object())

    class AsyncHook(PassthroughWorkerInterceptor):
        async def execute_activity(self, context: Any, next: Any) -> Any:  # type: ignore[override]
            return next(context)

    with pytest.raises(TypeError):
        instrumentation.install_worker_interceptor(AsyncHook())
    plain = PassthroughWorkerInterceptor()
    instrumentation.install_worker_interceptor(plain)
    instrumentation.install_worker_interceptor(plain)
    try:
        assert instrumentation.worker_interceptors() == (plain,)
    finally:
        instrumentation.uninstall(plain)
    assert instrumentation.worker_interceptors() == ()
