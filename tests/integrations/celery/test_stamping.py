"""Canvas stamping (``Signature.stamp``, ``stamp_links``, ``StampingVisitor``): the stamps Celery's
rules put on every signature of a canvas, and what a task, its worker-side ``task_received``
request and the publish signals see of them on a live dev server (and eagerly)."""

from __future__ import annotations

import base64
import json
from typing import Any, Dict, List

import pytest
from sync_worker_celery import chain, chord, group, signals
from sync_worker_celery.canvas import Signature, StampingVisitor, signature
from sync_worker_celery.canvas_workflow import CanvasWorkflow

from sync_worker.workflow import Replayer

from ._support import wait_for


class Fixed(StampingVisitor):
    def __init__(self, **stamps: Any) -> None:
        self.stamps = stamps

    def on_signature(self, sig: Any, **headers: Any) -> Dict[str, Any]:
        return dict(self.stamps)


class Recording(StampingVisitor):
    """Records which hook ran on what; stamps each signature with its own name."""

    def __init__(self) -> None:
        self.calls: List[str] = []

    def on_group_start(self, group: Any, **headers: Any) -> Dict[str, Any]:
        self.calls.append("group_start")
        return {"in_group": True}

    def on_group_end(self, group: Any, **headers: Any) -> None:
        self.calls.append("group_end")

    def on_chain_start(self, chain: Any, **headers: Any) -> Dict[str, Any]:
        self.calls.append("chain_start")
        return {}

    def on_chain_end(self, chain: Any, **headers: Any) -> None:
        self.calls.append("chain_end")

    def on_signature(self, sig: Any, **headers: Any) -> Dict[str, Any]:
        self.calls.append(f"sig:{sig.args}")
        return {"who": list(sig.args)}

    def on_chord_header_start(self, sig: Any, **headers: Any) -> Dict[str, Any]:
        self.calls.append("header_start")
        return {}

    def on_chord_header_end(self, sig: Any, **headers: Any) -> None:
        self.calls.append("header_end")

    def on_chord_body(self, sig: Any, **headers: Any) -> Dict[str, Any]:
        self.calls.append("body")
        return {"body": True}

    def on_callback(self, callback: Any, **headers: Any) -> Dict[str, Any]:
        self.calls.append("callback")
        return {"link": "cb"}

    def on_errback(self, errback: Any, **headers: Any) -> Dict[str, Any]:
        self.calls.append("errback")
        return {"link": "eb"}


def stamps_of(sig: Signature) -> Dict[str, Any]:
    names = sig.options.get("stamped_headers")
    assert names is not None, f"{sig!r} is not stamped"
    return {name: sig.options.get(name) for name in names}


def every_task(sig: Any) -> List[Signature]:
    """The task signatures a canvas runs (not its callbacks)."""
    sig = signature(sig) if not isinstance(sig, Signature) else sig
    if sig.subtask_type in ("chain", "group"):
        return [t for member in sig.tasks for t in every_task(member)]
    if sig.subtask_type == "chord":
        return every_task(sig.header) + every_task(sig.body)
    return [sig]


# -- unit: how stamps are put on a canvas ----------------------------------------------------------------

def test_a_signature_keeps_its_stamps_in_its_options() -> None:
    from proj.tasks import add

    sig = add.si(1, 2)
    sig.stamp(visitor=Fixed(stamp=42), monitoring_id="m-1")
    assert sorted(sig.options["stamped_headers"]) == ["monitoring_id", "stamp"]
    assert stamps_of(sig) == {"stamp": 42, "monitoring_id": "m-1"}
    sig.stamp(visitor=Fixed(stamp=43))  # a newer value replaces the stamp ...
    assert stamps_of(sig) == {"stamp": 43, "monitoring_id": "m-1"}
    sig.stamp(append_stamps=True, stamp=7)  # ... or, appended, is gathered with it (the newer first)
    assert stamps_of(sig) == {"stamp": [7, 43], "monitoring_id": "m-1"}
    sig.stamp(tags=["a"])
    sig.stamp(tags=["b"])  # two lists are joined
    assert stamps_of(sig)["tags"] == ["b", "a"]
    clone = sig.clone()
    assert stamps_of(clone) == stamps_of(sig)


def test_the_keyword_headers_win_over_the_visitor() -> None:
    from proj.tasks import add

    sig = add.si(1, 2)
    sig.stamp(visitor=Fixed(stamp="visitor", other=1), stamp="keyword")
    assert stamps_of(sig) == {"stamp": "keyword", "other": 1}
    gathered = add.si(1, 2)
    gathered.stamp(visitor=Fixed(stamp="visitor"), append_stamps=True, stamp="keyword")
    assert stamps_of(gathered) == {"stamp": ["keyword", "visitor"]}
    listed = add.si(1, 2)
    listed.stamp(visitor=Fixed(stamp=[4, 2]))
    assert stamps_of(listed)["stamp"] == [4, 2]


def test_every_task_of_a_nested_canvas_and_its_callbacks_are_stamped() -> None:
    from proj.tasks import add, tsum

    canvas = chord(group(chain(add.s(1, 1), add.s(2)), chord([add.s(3, 3), add.s(4, 4)], tsum.s())), tsum.s())
    canvas.link(add.si(0, 0))
    canvas.link_error(add.si(9, 9))
    canvas.stamp(visitor=Fixed(stamp=42))
    tasks = every_task(canvas)
    assert len(tasks) == 6
    assert all(stamps_of(t)["stamp"] == 42 for t in tasks)
    links = canvas.options["link"] + canvas.options["link_error"]
    assert [stamps_of(link)["stamp"] for link in links] == [42, 42]
    # stamps survive the canvas as data (a stamped canvas sent on as a dict)
    copy = signature(json.loads(json.dumps(canvas)))
    assert all(stamps_of(t)["stamp"] == 42 for t in every_task(copy))


def test_the_visitor_hooks_run_for_each_part_in_celerys_order() -> None:
    from proj.tasks import add, tsum

    header_task = add.si(1, 1)
    header_task.link(add.si(5, 5))
    header_task.link_error(add.si(6, 6))
    canvas = chord([header_task, chain(add.si(2, 2), add.s(3))], tsum.s())
    visitor = Recording()
    canvas.stamp(visitor=visitor)
    assert visitor.calls == ["header_start", "callback", "sig:(5, 5)", "errback", "sig:(6, 6)", "sig:(1, 1)",
                             "chain_start", "sig:(2, 2)", "sig:(3,)", "chain_end", "header_end", "body", "sig:()"]
    header, body = canvas.header.tasks[0], canvas.body
    assert stamps_of(header) == {"who": [1, 1]}
    assert stamps_of(body) == {"who": [], "body": True}
    callback, errback = header.options["link"][0], header.options["link_error"][0]
    assert stamps_of(callback) == {"link": "cb", "who": [5, 5]}
    assert stamps_of(errback) == {"link": "eb", "who": [6, 6]}
    in_group = group(add.si(7, 7))
    in_group.stamp(visitor=Recording())
    assert stamps_of(in_group.tasks[0]) == {"in_group": True, "who": [7, 7]}


def test_stamp_links_stamps_the_callbacks_only() -> None:
    from proj.tasks import add

    sig = add.si(1, 1)
    sig.options["link"] = dict(add.si(2, 2))  # one signature as a dict (not a list), as Celery accepts
    sig.stamp_links(visitor=Fixed(stamp=1))
    assert "stamped_headers" not in sig.options
    assert stamps_of(sig.options["link"][0]) == {"stamp": 1}


def test_a_visitor_must_give_on_signature() -> None:
    from proj.tasks import add

    with pytest.raises(NotImplementedError):
        add.si(1, 1).stamp(visitor=StampingVisitor())


def test_an_eager_call_sees_its_stamps() -> None:
    from proj.tasks import stamps_view

    sig = stamps_view.si()
    sig.stamp(visitor=Fixed(stamp=42, tags=["a"]), monitoring_id="m")
    # eagerly every value is a list, as Celery's Task.apply builds the request
    assert sig.apply().get() == [["monitoring_id", "stamp", "tags"],
                                 {"stamp": [42], "monitoring_id": ["m"], "tags": ["a"]}]


# -- live: the stamps travel with the task ---------------------------------------------------------------

@pytest.mark.usefixtures("sample_worker")
class TestStampsOnTheWorker:
    def test_a_stamped_task_sees_its_stamps_and_the_signals_carry_them(self) -> None:
        from proj.tasks import stamps_view

        published: List[Dict[str, Any]] = []
        received: List[Any] = []

        def on_publish(sender: Any = None, headers: Any = None, properties: Any = None, **kw: Any) -> None:
            published.append({"headers": dict(headers), "properties": dict(properties)})

        def on_received(request: Any = None, **kw: Any) -> None:
            received.append(request)

        signals.before_task_publish.connect(on_publish, weak=False)
        signals.task_received.connect(on_received, weak=False)
        try:
            sig = stamps_view.si()
            sig.stamp(visitor=Fixed(stamp=[4, 2]), monitoring_id="m-1")
            result = sig.apply_async()
            assert result.get(timeout=30) == [["monitoring_id", "stamp"], {"stamp": [4, 2], "monitoring_id": "m-1"}]
        finally:
            signals.before_task_publish.disconnect(on_publish)
            signals.task_received.disconnect(on_received)
        headers, properties = published[-1]["headers"], published[-1]["properties"]
        assert sorted(headers["stamped_headers"]) == ["monitoring_id", "stamp"]
        assert headers["stamps"] == {"stamp": [4, 2], "monitoring_id": "m-1"}
        assert not {"stamped_headers", "stamp", "monitoring_id"} & set(properties)  # never message properties
        request = wait_for(lambda: next((r for r in received if r.id == result.id), None))
        assert request.stamps == {"stamp": [4, 2], "monitoring_id": "m-1"}
        assert sorted(request.stamped_headers) == ["monitoring_id", "stamp"]

    def test_every_task_of_a_stamped_canvas_and_its_callbacks_run_stamped(self) -> None:
        from proj.tasks import stamps_view

        received: List[Any] = []
        published: List[Dict[str, Any]] = []

        def on_received(request: Any = None, **kw: Any) -> None:
            received.append(request)

        def on_publish(sender: Any = None, headers: Any = None, **kw: Any) -> None:
            published.append(dict(headers))

        signals.task_received.connect(on_received, weak=False)
        signals.before_task_publish.connect(on_publish, weak=False)
        try:
            link = stamps_view.si("link")
            canvas = chain(group(stamps_view.si(1), chain(stamps_view.si(2), stamps_view.si(3))),
                           chord([stamps_view.si(4), stamps_view.si(5)], stamps_view.si("body")))
            canvas.link(link)
            canvas.stamp(visitor=Fixed(stamp=42))
            result = canvas.apply_async()
            assert result.get(timeout=60) == [["stamp"], {"stamp": 42}]
            ran = wait_for(lambda: {tuple(r.args) for r in received if r.task == "proj.tasks.stamps_view"}
                           if len([r for r in received if r.task == "proj.tasks.stamps_view"]) >= 7 else None)
        finally:
            signals.task_received.disconnect(on_received)
            signals.before_task_publish.disconnect(on_publish)
        assert ran == {(1,), (2,), (3,), (4,), (5,), ("body",), ("link",)}
        mine = [r for r in received if r.task == "proj.tasks.stamps_view"]
        assert all(r.stamps == {"stamp": 42} and r.stamped_headers == ["stamp"] for r in mine)
        # the task its link is on sees the stamped link in its request (Celery's message body)
        linked = [r for r in mine if r.callbacks]
        assert [tuple(r.args) for r in linked] == [("body",)]
        callback = linked[0]._Request__payload[2]["callbacks"][0]
        assert callback["options"]["stamped_headers"] == ["stamp"] and callback["options"]["stamp"] == 42
        # starting the canvas publishes its tasks, with their stamps in the headers
        announced = [h for h in published if h.get("task") == "proj.tasks.stamps_view"]
        assert len(announced) == 6 and all(h["stamps"] == {"stamp": 42} for h in announced)

    def test_the_stamps_are_in_the_runs_history(self, sample_app) -> None:
        from proj.tasks import stamps_view

        canvas = chain(stamps_view.si(1), stamps_view.si(2))
        canvas.stamp(monitoring_id="from-history")
        result = canvas.apply_async()
        assert result.get(timeout=30) == [["monitoring_id"], {"monitoring_id": "from-history"}]
        described = sample_app.client.describe_workflow(result.id)
        history = sample_app.client.export_history(result.id, described.run_id)
        # the stamps are in the run's start input (each task's call metadata), so replay never reads
        # them from anywhere else; the Avro payload holds the strings as UTF-8
        start_input = base64.b64decode(history["payloads"]["arguments"]["data"]["blob"])
        assert start_input.count(b"from-history") == 2 and start_input.count(b"stamped_headers") == 2
        Replayer(workflows=[CanvasWorkflow]).replay(history)  # raises on a divergence


def test_revoking_by_stamped_headers_is_refused_by_name(sample_app) -> None:
    from sync_worker_celery.exceptions import UnsupportedFeature
    from sync_worker_celery.result import AsyncResult

    with pytest.raises(UnsupportedFeature, match="revoke_by_stamped_headers"):
        sample_app.control.revoke_by_stamped_headers({"monitoring_id": ["m"]}, terminate=False, reply=True)
    with pytest.raises(UnsupportedFeature, match="revoke_by_stamped_headers"):
        AsyncResult("some-id", app=sample_app).revoke_by_stamped_headers({"monitoring_id": "m"})
