"""No callback is dropped: ``link`` and ``link_error`` given to a group, a chord, a nested chain, a
chain in a chord and a chord in a chain run durably, where Celery runs them (canvas_workflow.
attach_callback), on the worker and eagerly. Each test records through the ``note`` task."""

from __future__ import annotations

import itertools
from typing import Any, Callable, List, Tuple

import pytest
from sync_worker_celery import chain, chord, group

from ._support import wait_for

_labels = itertools.count()


def _label(prefix: str) -> str:
    return f"{prefix}-{next(_labels)}"


def _calls(label: str) -> List[Tuple[Any, ...]]:
    from proj.tasks import CALLBACKS

    return [args for args in list(CALLBACKS) if label in args]


def _ran(label: str, times: int = 1) -> List[Tuple[Any, ...]]:
    wait_for(lambda: len(_calls(label)) >= times, timeout=30)
    return _calls(label)


def _settles(result: Any, fails: bool) -> None:
    if fails:
        with pytest.raises(ValueError, match="boom"):
            result.get(timeout=60)
    else:
        result.get(timeout=60)


def _shapes() -> List[Tuple[str, Callable[[bool], Any], Any]]:
    """(name, build(fail) -> canvas, value the link gets on success)."""
    from proj.tasks import add, explode, tsum

    def bad() -> Any:
        return explode.si("boom")

    return [
        ("group", lambda fail: group(add.s(1, 1), bad() if fail else add.s(2, 2)), None),
        ("chord", lambda fail: chord([add.s(1, 1), bad() if fail else add.s(2, 2)], tsum.s()), 6),
        ("nested chain", lambda fail: chain(add.s(1, 1), chain(add.s(1), bad() if fail else add.s(1))), 4),
        ("chain in chord", lambda fail: chord([chain(add.s(1, 1), bad() if fail else add.s(1)), add.s(5, 5)],
                                              tsum.s()), 13),
        ("chord in chain", lambda fail: chain(add.s(1, 1), chord([add.s(1), bad() if fail else add.s(2)], tsum.s())),
         7),
    ]


SHAPES = [name for name, _, _ in _shapes()]


def _shape(name: str) -> Tuple[Callable[[bool], Any], Any]:
    return next((build, value) for n, build, value in _shapes() if n == name)


@pytest.mark.usefixtures("sample_worker")
class TestCallbacksOnTheWorker:
    @pytest.mark.parametrize("shape", SHAPES)
    def test_link_on_the_whole_canvas_runs_once_with_its_result(self, shape: str) -> None:
        from proj.tasks import note

        build, value = _shape(shape)
        label = _label("link")
        canvas = build(False)
        canvas.link(note.s(label))
        canvas.link_error(note.s(_label("unused")))
        _settles(canvas.apply_async(), fails=False)
        calls = _ran(label)
        assert len(calls) == 1
        # a group's link is immutable in Celery (it is attached to the first task)
        assert calls[0] == ((label,) if shape == "group" else (value, label))

    @pytest.mark.parametrize("shape", SHAPES)
    def test_link_error_on_the_whole_canvas_runs_with_the_failed_task(self, shape: str) -> None:
        from proj.tasks import note

        build, _ = _shape(shape)
        label, unused = _label("errback"), _label("link")
        canvas = build(True)
        canvas.link_error(note.s(label))
        canvas.link(note.s(unused))
        _settles(canvas.apply_async(), fails=True)
        calls = _ran(label)
        assert len(calls) == 1
        if shape == "group":
            # Celery's group link is an immutable clone on the first member, which succeeded here,
            # and its errback an immutable clone on each member: no arguments added
            assert calls == [(label,)] and _ran(unused) == [(unused,)]
        else:
            # note(*args) is a new-style errback (Celery: more than one positional argument)
            request, exc, _traceback, own = calls[0]
            # a chord's errbacks sit on its body, which a failed header never runs: they get the body's
            # request (Celery's chord_error_from_stack)
            assert request.task == ("proj.tasks.tsum" if "chord" in shape else "proj.tasks.explode")
            assert isinstance(request.id, str) and request.id
            assert isinstance(exc, ValueError) and str(exc) == "boom" and own == label
            assert not _calls(unused)

    # not on a group: Celery makes a group's errback immutable, so a one-argument errback gets nothing
    @pytest.mark.parametrize("shape", [shape for shape in SHAPES if shape != "group"])
    def test_an_old_style_errback_gets_the_failed_task_id(self, shape: str) -> None:
        from proj.tasks import CALLBACKS, note_old_style

        build, _ = _shape(shape)
        canvas = build(True)
        canvas.link_error(note_old_style.s())
        result = canvas.apply_async()
        _settles(result, fails=True)
        root = result.id
        wait_for(lambda: any(str(a[0]).startswith(root) for a in list(CALLBACKS) if a[1:] == ("old-style",)),
                 timeout=30)

    def test_callbacks_at_every_level_of_a_nested_canvas_all_run(self) -> None:
        from proj.tasks import add, note, tsum

        labels = {level: _label(level) for level in ("task", "inner-chain", "group", "chord", "outer")}
        inner = chain(add.s(1), add.s(1))
        inner.link(note.s(labels["inner-chain"]))
        member = add.s(10)
        member.link(note.s(labels["task"]))
        header = group(inner, member)
        header.link(note.si(labels["group"]))
        body = chord(header, tsum.s())
        body.link(note.s(labels["chord"]))
        outer = chain(add.s(1, 1), body)
        outer.link(note.s(labels["outer"]))
        assert outer.apply_async().get(timeout=60) == (2 + 1 + 1) + (2 + 10)
        assert _ran(labels["task"]) == [(12, labels["task"])]
        assert _ran(labels["inner-chain"]) == [(4, labels["inner-chain"])]
        assert _ran(labels["group"]) == [(labels["group"],)]
        # the chord's and the chain's link both sit on the chord's body: both run with its result
        assert _ran(labels["chord"]) == [(16, labels["chord"])]
        assert _ran(labels["outer"]) == [(16, labels["outer"])]

    def test_joining_chains_keeps_their_callbacks(self) -> None:
        from proj.tasks import add, note

        first = chain(add.s(1, 1), add.s(1))
        label = _label("first")
        first.link(note.s(label))
        joined = first | add.s(100)
        assert joined.apply_async().get(timeout=60) == 103
        assert _ran(label) == [(3, label)]


class TestCallbacksEagerly:
    @pytest.mark.parametrize("shape", SHAPES)
    def test_link_and_link_error_run_eagerly_too(self, shape: str) -> None:
        from proj.tasks import note

        build, value = _shape(shape)
        ok, bad = _label("eager-link"), _label("eager-errback")
        canvas = build(False)
        canvas.link(note.s(ok))
        canvas.apply().get()
        assert _calls(ok) == [((ok,) if shape == "group" else (value, ok))]
        failing = build(True)
        failing.link_error(note.s(bad))
        failing.apply()
        calls = _calls(bad)
        assert len(calls) == 1
        if shape != "group":
            assert isinstance(calls[0][1], ValueError) and calls[0][-1] == bad   # new style, eagerly too
