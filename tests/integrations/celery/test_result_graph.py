"""Result graph navigation and generator chord headers on a live worker, as Celery gives them:

* a chain's ``AsyncResult`` links its steps by ``.parent`` (a group step as a ``GroupResult``),
  each step reads its own state and value, tasks see ``root_id`` = the first task's id and
  ``parent_id`` = the step before (a chord body: a header task);
* a chord whose header is a generator starts each header task as the generator yields it (the
  first has run before the generator is done), and the body gets every result in yield order;
  a generator that raises cancels the run.
"""

from __future__ import annotations

import pytest
from sync_worker_celery import chain, chord, group, states
from sync_worker_celery.exceptions import TaskRevokedError
from sync_worker_celery.result import AsyncResult, GroupResult

from ._support import wait_for

pytestmark = pytest.mark.usefixtures("sample_worker")


def test_chain_parent_links_and_ids() -> None:
    from proj.tasks import add, request_ids

    first = request_ids.si("one")
    first_id = first.freeze().id
    res = chain(first, request_ids.si("two"), group(request_ids.si("g1"), request_ids.si("g2")), add.si(1, 1))()
    assert res.get(timeout=60) == 2
    header = res.parent
    assert isinstance(header, GroupResult) and len(header.results) == 2
    two, one = header.parent, header.parent.parent
    assert isinstance(two, AsyncResult) and one.id == first_id and one.parent is None
    assert one.get(timeout=30) == [first_id, None, "one"]           # root_id, parent_id, label
    assert two.get(timeout=30) == [first_id, first_id, "two"]
    assert header.get(timeout=30) == [[first_id, two.id, "g1"], [first_id, two.id, "g2"]]
    assert one.state == two.state == states.SUCCESS


def test_a_failed_step_is_read_through_parent() -> None:
    from proj.tasks import add, explode

    res = chain(add.si(1, 2), explode.si("step two"), add.si(3, 4))()
    with pytest.raises(ValueError, match="step two"):
        res.get(timeout=30)
    with pytest.raises(ValueError, match="step two"):
        res.parent.get(timeout=30)
    assert res.parent.state == states.FAILURE and res.parent.parent.parent is None
    # (a failed run answers no members query, so the first step also reads the failure; docs/celery.md)


def test_chord_body_parent_is_a_header_task() -> None:
    from proj.tasks import request_ids

    res = chain(request_ids.si("a"), chord([request_ids.si("h1"), request_ids.si("h2")], request_ids.si("body")))()
    root_id, parent_id, label = res.get(timeout=60)
    assert label == "body" and parent_id in res.parent.results and root_id == res.parent.parent.id


def test_generator_header_runs_members_as_they_are_yielded() -> None:
    from proj.tasks import CALLBACKS, note

    def header():
        yield note.si("gen-0")
        # the first member runs before the generator yields the next (Celery's incremental publish)
        wait_for(lambda: ("gen-0",) in list(CALLBACKS), timeout=30)
        yield note.si("gen-1")
        yield note.si("gen-2")

    result = chord(header(), note.s("body"))()
    assert result.get(timeout=60) == [[["gen-0"], ["gen-1"], ["gen-2"]], "body"]


def test_a_generator_that_raises_cancels_the_chord() -> None:
    from proj.tasks import note

    def header():
        yield note.si("broken-0")
        raise RuntimeError("generator broke")

    with pytest.raises(RuntimeError, match="generator broke"):
        chord(header(), note.s("never"), task_id="gen-broken-chord")()
    with pytest.raises(TaskRevokedError):
        AsyncResult("gen-broken-chord").get(timeout=30)


def test_generator_header_and_chain_runs_replay_cold(sample_app) -> None:
    """The recorded runs replay from scratch with the same decisions (signals where they were applied)."""
    from proj.tasks import note, request_ids
    from sync_worker_celery.canvas_workflow import CanvasWorkflow

    from sync_worker.workflow import Replayer

    def header():
        for i in range(3):
            yield note.si(f"replay-{i}")

    streamed = chord(header(), note.s("replay-body"))()
    streamed.get(timeout=60)
    chained = chain(request_ids.si("r1"), request_ids.si("r2"))()
    chained.get(timeout=60)
    replayer = Replayer(workflows=[CanvasWorkflow])
    for run in (streamed, chained):
        described = sample_app.client.describe_workflow(run.id)
        history = sample_app.client.export_history(run.id, described.run_id)
        replayer.replay(history)   # raises NonDeterministicReplayError on a divergence


def test_a_task_returning_a_result_stores_its_tuple() -> None:
    """Celery's backends store a returned AsyncResult as ``as_tuple()``: ``((id, parent), None)``."""
    from proj.tasks import start_a_chain

    stored = start_a_chain.delay().get(timeout=60)
    (chain_id, parent), members = stored
    assert members is None and isinstance(parent, list)
    (group_id, group_parent), group_members = parent     # the group step, as a GroupResult tuple
    assert group_id is None and isinstance(group_parent, list) and len(group_members) == 2
    assert AsyncResult(chain_id).get(timeout=60) == (2 + 2) + (2 + 3)
