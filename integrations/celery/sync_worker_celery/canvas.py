"""Signatures and the canvas: ``signature``/``.s()``/``.si()``, ``chain``, ``group``, ``chord``.

A signature is a dict (as in Celery: ``task``, ``args``, ``kwargs``, ``options``,
``subtask_type``, ``immutable``), so it travels as data. Starting a chain, group or chord
starts **one durable workflow** (:mod:`.canvas_workflow`) that schedules each task as an
activity and passes results along; it survives worker crashes, since every step is in the
server's history. ``apply()`` (and eager mode) runs the same canvas here, in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence

from .exceptions import UnsupportedFeature
from .stamping import StampingVisitor, stamp_signature

if TYPE_CHECKING:  # pragma: no cover
    from .app import Celery
    from .result import AsyncResult, EagerResult, GroupResult
    from .task import Task

__all__ = ["Signature", "StampingVisitor", "chain", "chord", "group", "maybe_signature", "signature", "subtask"]

MEMBER_SEPARATOR = "~"


class Signature(dict):  # type: ignore[type-arg]
    """A task call waiting to happen: task name, args, kwargs and options."""

    def __init__(self, task: Any = None, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
                 options: Optional[Dict[str, Any]] = None, type: Any = None, subtask_type: Optional[str] = None,
                 immutable: bool = False, app: Optional[Celery] = None, **ex: Any) -> None:
        self._app = app
        if isinstance(task, dict) and "task" in task:
            super().__init__(task)
            return
        name = task if isinstance(task, str) or task is None else getattr(task, "name", None)
        if task is not None and not isinstance(task, str):
            self._type = task
            if app is None:
                self._app = getattr(task, "_app", None)
        super().__init__(task=name, args=tuple(args or ()), kwargs=dict(kwargs or {}),
                         options=dict(options or {}, **ex), subtask_type=subtask_type, immutable=immutable)

    # -- attributes as in Celery ------------------------------------------------------------------------

    name = property(lambda self: self.get("task"))
    task = property(lambda self: self.get("task"))
    # assignable, as Celery's (sig.args = (...), sig.kwargs = {...}, sig.options = {...})
    args = property(lambda self: tuple(self.get("args") or ()),
                    lambda self, value: self.__setitem__("args", tuple(value)))
    kwargs = property(lambda self: dict(self.get("kwargs") or {}),
                      lambda self, value: self.__setitem__("kwargs", dict(value)))
    options = property(lambda self: self["options"], lambda self, value: self.__setitem__("options", dict(value)))
    subtask_type = property(lambda self: self.get("subtask_type"))
    immutable = property(lambda self: bool(self.get("immutable")),
                         lambda self, value: self.__setitem__("immutable", bool(value)))

    def stamp(self, visitor: Any = None, append_stamps: bool = False, **headers: Any) -> Optional[Signature]:
        """Stamp this signature and everything it runs (:mod:`.stamping`), as Celery's (which returns a
        task signature itself, and None for a canvas)."""
        stamp_signature(self, visitor, append_stamps, headers)
        return self if self.subtask_type is None else None

    def stamp_links(self, visitor: Any = None, append_stamps: bool = False, **headers: Any) -> None:
        """Stamp only this signature's callbacks and errbacks, as Celery's."""
        from .stamping import stamp_links

        stamp_links(self, visitor, append_stamps, headers)

    @property
    def id(self) -> Optional[str]:
        value = self["options"].get("task_id")
        return None if value is None else str(value)

    @property
    def app(self) -> Celery:
        if self._app is not None:
            return self._app
        from .app import current_app

        return current_app()

    @property
    def type(self) -> Task:
        found: Optional[Task] = getattr(self, "_type", None)
        if found is None:
            found = self.app.tasks[self.name]
        assert found is not None
        return found

    def __repr__(self) -> str:
        call = ", ".join([repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()])
        return f"{self.name}({call})"

    # -- building --------------------------------------------------------------------------------------

    def clone(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
              **opts: Any) -> Signature:
        """A copy; ``args`` are prepended (partial application), ``kwargs`` merged, options updated."""
        copy = type(self).from_dict(dict(self), app=self._app)
        if args and not self.immutable:
            copy["args"] = tuple(args) + copy.args
        if kwargs and not self.immutable:
            copy["kwargs"] = {**copy.kwargs, **kwargs}
        copy["options"] = {**self.options, **opts}
        for key in ("link", "link_error"):  # a copy's callbacks are its own (link() on it appends)
            if isinstance(copy["options"].get(key), (list, tuple)):
                copy["options"][key] = list(copy["options"][key])
        if getattr(self, "_type", None) is not None:
            copy._type = self._type
        return copy

    partial = clone

    @classmethod
    def from_dict(cls, d: Dict[str, Any], app: Optional[Celery] = None) -> Signature:
        kind = d.get("subtask_type")
        target: Any = {"chain": _chain, "group": group, "chord": chord}.get(str(kind), Signature)
        sig: Signature = dict.__new__(target)
        sig._app = app
        dict.__init__(sig, d)
        sig["options"] = dict(d.get("options") or {})
        return sig

    def set(self, immutable: Optional[bool] = None, **options: Any) -> Signature:
        if immutable is not None:
            self["immutable"] = immutable
        self["options"].update(options)
        return self

    def set_immutable(self, immutable: bool) -> None:
        self["immutable"] = immutable

    def link(self, callback: Signature) -> Signature:
        self["options"].setdefault("link", []).append(callback)
        return callback

    def link_error(self, errback: Signature) -> Signature:
        self["options"].setdefault("link_error", []).append(errback)
        return errback

    def on_error(self, errback: Signature) -> Signature:
        """``link_error`` that returns this signature (for chaining), as Celery's."""
        self.link_error(errback)
        return self

    def freeze(self, _id: Optional[str] = None, **kwargs: Any) -> AsyncResult:
        from .result import AsyncResult
        from .utils import uuid

        self["options"].setdefault("task_id", _id or uuid())
        return AsyncResult(self.id or "", app=self.app, task_name=self.name)

    def __or__(self, other: Any) -> Signature:
        if isinstance(other, _chain):
            return _chain(self, *other.unchain_tasks(), app=self._app)
        if isinstance(other, Signature):
            if isinstance(self, group) and not isinstance(other, group):
                return chord(self, other, app=self._app)
            return _chain(self, other, app=self._app)
        return NotImplemented

    # -- running -----------------------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        sig = self.clone(args, kwargs)
        return sig.type(*sig.args, **sig.kwargs)

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
                    **options: Any) -> Any:
        sig = self.clone(args, kwargs, **options)
        opts = {k: v for k, v in sig.options.items() if k not in ("task_id", "link", "link_error")}
        task = getattr(sig, "_type", None) or sig.app.tasks.get(sig.name)
        if task is not None:
            return task.apply_async(sig.args, sig.kwargs, task_id=sig.id, link=sig.options.get("link"),
                                    link_error=sig.options.get("link_error"), **opts)
        return sig.app.send_task(sig.name, sig.args, sig.kwargs, task_id=sig.id, link=sig.options.get("link"),
                                 link_error=sig.options.get("link_error"), **opts)

    def apply(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
              **options: Any) -> EagerResult:
        sig = self.clone(args, kwargs, **options)
        opts = {k: v for k, v in sig.options.items() if k not in ("task_id", "link", "link_error")}
        return sig.type.apply(sig.args, sig.kwargs, task_id=sig.id, link=sig.options.get("link"),
                              link_error=sig.options.get("link_error"), **opts)

    def _start_as_canvas(self, root_id: str, queue: str) -> Any:
        from .canvas_workflow import start_canvas

        return start_canvas(self.app, self, root_id, queue)


def _flatten(tasks: Sequence[Any]) -> List[Any]:
    if len(tasks) == 1 and not isinstance(tasks[0], dict) and isinstance(tasks[0], Iterable):
        return list(tasks[0])
    return list(tasks)


class _chain(Signature):
    """Run the tasks one after another, each getting the previous result as its first argument."""

    def __init__(self, *tasks: Any, app: Optional[Celery] = None, **options: Any) -> None:
        members = [maybe_signature(t, app=app) for t in _flatten(tasks)]
        super().__init__("celery.chain", (), {"tasks": members}, options, subtask_type="chain", app=app)

    @property
    def tasks(self) -> List[Signature]:
        return [maybe_signature(t, app=self._app) for t in self["kwargs"]["tasks"]]

    def unchain_tasks(self) -> List[Signature]:
        """Copies of the tasks with the chain's own callbacks moved onto them (its link on the last task,
        its link_error on every task), so joining chains never drops a callback (as Celery's)."""
        tasks = [t.clone() for t in self.tasks]
        for callback in self.options.get("link") or []:
            if tasks:
                tasks[-1].link(callback)
        for errback in self.options.get("link_error") or []:
            for task in tasks:
                task.link_error(errback)
        return tasks

    def __or__(self, other: Any) -> Signature:
        if isinstance(other, _chain):
            return _chain(*self.unchain_tasks(), *other.unchain_tasks(), app=self._app)
        if isinstance(other, Signature):
            return _chain(*self.unchain_tasks(), other, app=self._app)
        return NotImplemented

    def clone(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
              **opts: Any) -> Signature:
        tasks = self.tasks
        if (args or kwargs) and tasks:  # partial arguments go to the first task, as in Celery
            tasks[0] = tasks[0].clone(args, kwargs)
        copy = _chain(*tasks, app=self._app, **{**self.options, **opts})
        return copy

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
                    **options: Any) -> Any:
        if self.app.conf.task_always_eager:
            return self.apply(args, kwargs, **options)
        sig = self.clone(args, kwargs, **options)
        return sig._start_as_canvas(_root_id(sig), _first_queue(sig))

    def apply(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
              **options: Any) -> Any:
        from .canvas_eager import run_eagerly

        return run_eagerly(self.clone(args, kwargs, **options))

    def __repr__(self) -> str:
        return " | ".join(repr(t) for t in self.tasks) or "chain()"


#: ``chain(a.s(1), b.s(), c.s())`` or ``a.s(1) | b.s() | c.s()``.
chain = _chain


class group(Signature):
    """Run the tasks in parallel; the result is the list of their results, in order."""

    def __init__(self, *tasks: Any, app: Optional[Celery] = None, **options: Any) -> None:
        if len(tasks) == 1 and isinstance(tasks[0], dict) and tasks[0].get("subtask_type") == "group":
            super().__init__(tasks[0], app=app)
            return
        members = [maybe_signature(t, app=app) for t in _flatten(tasks)]
        super().__init__("celery.group", (), {"tasks": members}, options, subtask_type="group", app=app)

    @property
    def tasks(self) -> List[Signature]:
        return [maybe_signature(t, app=self._app) for t in self["kwargs"]["tasks"]]

    def clone(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
              **opts: Any) -> Signature:
        tasks = [t.clone(args, kwargs) for t in self.tasks]
        return group(tasks, app=self._app, **{**self.options, **opts})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
                    **options: Any) -> GroupResult:
        if self.app.conf.task_always_eager:
            eager: GroupResult = self.apply(args, kwargs, **options)
            return eager
        sig = self.clone(args, kwargs, **options)
        started: GroupResult = sig._start_as_canvas(_root_id(sig), _first_queue(sig))
        return started

    def apply(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
              **options: Any) -> Any:
        from .canvas_eager import run_eagerly

        return run_eagerly(self.clone(args, kwargs, **options))

    def __repr__(self) -> str:
        return f"group([{', '.join(repr(t) for t in self.tasks)}])"


class chord(Signature):
    """Run the header group, then the body with the list of header results as its first argument."""

    def __init__(self, header: Any, body: Optional[Any] = None, app: Optional[Celery] = None, **options: Any) -> None:
        if isinstance(header, dict) and header.get("subtask_type") == "chord":
            super().__init__(header, app=app)
            return
        stream = header if isinstance(header, Iterator) and not isinstance(header, dict) else None
        head = header if isinstance(header, group) else group([] if stream is not None else header, app=app)
        super().__init__("celery.chord", (), {"header": head, "body": maybe_signature(body, app=app)}, options,
                         subtask_type="chord", app=app)
        #: a generator header, read as apply_async publishes it (canvas_stream); any other use reads it whole
        self._stream: Optional[Iterator[Any]] = stream

    @property
    def header(self) -> group:
        stream = getattr(self, "_stream", None)
        if stream is not None:
            self._stream = None
            self["kwargs"]["header"] = group(list(stream), app=self._app)
        return group(self["kwargs"]["header"], app=self._app)

    @property
    def tasks(self) -> List[Signature]:
        """The header's tasks (Celery's ``chord.tasks``)."""
        return self.header.tasks

    @property
    def body(self) -> Optional[Signature]:
        body: Optional[Signature] = maybe_signature(self["kwargs"]["body"], app=self._app)
        return body

    def clone(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
              **opts: Any) -> Signature:
        return chord(self.header.clone(args, kwargs), self.body, app=self._app, **{**self.options, **opts})

    def __call__(self, body: Optional[Signature] = None, **options: Any) -> Any:
        sig = self if body is None else chord(self.header, body, app=self._app, **self.options)
        return sig.apply_async((), {}, **options)

    def apply_async(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
                    **options: Any) -> Any:
        if self.body is None:
            raise ValueError("a chord needs a body: chord(header)(body) or chord(header, body)")
        if self.app.conf.task_always_eager:
            return self.apply(args, kwargs, **options)
        stream = getattr(self, "_stream", None)
        if stream is not None and not args and not kwargs:
            from .canvas_stream import start_streamed_chord

            self._stream = None
            return start_streamed_chord(self, stream, options)
        sig = self.clone(args, kwargs, **options)
        return sig._start_as_canvas(_root_id(sig), _first_queue(sig))

    def apply(self, args: Optional[Sequence[Any]] = None, kwargs: Optional[Dict[str, Any]] = None,
              **options: Any) -> Any:
        from .canvas_eager import run_eagerly

        return run_eagerly(self.clone(args, kwargs, **options))

    def __repr__(self) -> str:
        return f"chord({self.header!r}, {self.body!r})"


def _root_id(sig: Signature) -> str:
    from .utils import uuid

    return str(sig.options.get("task_id") or uuid())


def _first_queue(sig: Signature) -> str:
    queue = sig.options.get("queue")
    return str(queue or sig.app.conf.task_default_queue)


def signature(varies: Any, *args: Any, **kwargs: Any) -> Signature:
    """``signature("proj.tasks.add", args=(2, 3))``, or a Task / dict to a signature."""
    app = kwargs.pop("app", None)
    if isinstance(varies, dict):
        if isinstance(varies, Signature):
            return varies.clone()
        return Signature.from_dict(varies, app=app)
    return Signature(varies, *args, **dict(kwargs, app=app))


subtask = signature


def maybe_signature(d: Any, app: Optional[Celery] = None) -> Any:
    if d is None or isinstance(d, Signature):
        return d
    if isinstance(d, dict):
        return Signature.from_dict(d, app=app)
    if hasattr(d, "name") and hasattr(d, "apply_async"):
        return Signature(d, app=app)
    raise TypeError(f"expected a signature, got {type(d).__name__}")


def refuse_unsupported(name: str) -> Any:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedFeature(f"celery.{name} is not supported by sync_worker_celery; build a group instead")
    return refused


chunks = refuse_unsupported("chunks")
xmap = refuse_unsupported("xmap")
xstarmap = refuse_unsupported("xstarmap")
