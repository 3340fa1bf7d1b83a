"""Work a replay does once per workflow class or at first use instead of on every task,
with the same decisions as before: entry-point checks, argument binding, the seeded Random."""

from __future__ import annotations

import random
from typing import Any

import pytest

from sync_worker import workflow
from sync_worker.errors import InvalidWorkflowDefinition, WorkflowEntryArgumentsMismatchError
from sync_worker.workflow import replay
from sync_worker.workflow.context import WorkflowContext

from ._helpers import result_of, started, wire


def test_a_run_replaced_after_a_valid_replay_is_checked_again() -> None:
    @workflow.defn(name="setup.replaced")
    class Replaced:
        def run(self, ctx: Any) -> Any:
            return 1

    assert result_of(wire(Replaced, [started()])) == 1
    assert result_of(wire(Replaced, [started()])) == 1

    async def run(self: Any, ctx: Any) -> Any:
        return 2

    Replaced.run = run  # type: ignore[method-assign]
    with pytest.raises(InvalidWorkflowDefinition, match="unsupported_workflow_entrypoint"):
        replay(Replaced, [started()], [])


def test_an_argument_count_that_bound_once_does_not_vouch_for_another() -> None:
    @workflow.defn(name="setup.one_arg")
    class OneArg:
        def run(self, ctx: Any, a: int) -> Any:
            return a + 1

    assert result_of(wire(OneArg, [started()], [1])) == 2
    assert result_of(wire(OneArg, [started()], [41])) == 42  # the same count: bound already
    for args in ([], [1, 2]):
        with pytest.raises(WorkflowEntryArgumentsMismatchError, match="workflow_entry_arguments_mismatch"):
            replay(OneArg, [started()], args)


def test_the_seeded_random_is_made_at_its_first_draw_and_draws_as_before() -> None:
    import hashlib

    ctx = WorkflowContext(workflow_id="wf", run_id="run-7")
    assert ctx._rng is None  # nothing drawn yet
    expected = random.Random(int(hashlib.sha256(b"run-7").hexdigest()[:16], 16))
    assert ctx.random() is ctx.random()
    assert [ctx.random().random() for _ in range(3)] == [expected.random() for _ in range(3)]
    first, again = WorkflowContext(run_id="run-7"), WorkflowContext(run_id="run-7")
    assert first.uuid4() == again.uuid4()
