"""Canvas stamping (Celery 5.3+): ``Signature.stamp``, ``stamp_links`` and ``StampingVisitor``.

A stamp is a named value put on a signature and on everything it runs: the members of a group,
chain or chord (header and body) and its callbacks and errbacks. As in Celery, a stamped
signature keeps its stamps in its options (``options["stamped_headers"]`` names them, each value
is ``options[name]``); publishing moves them into the message headers ``stamped_headers`` and
``stamps`` (:func:`split_options`), never into the message properties. Here the headers travel
with the task's durable input (the activity arguments' ``__celery__`` metadata, or the canvas
run's plan), so a retried, replayed or re-delivered task sees the same stamps:
``self.request.stamped_headers`` / ``self.request.stamps`` and the ``task_received`` /
``before_task_publish`` signals' request and headers.

Merging follows Celery's code (:func:`merge_stamps`): for a stamp given twice the newer value is kept
-- the keyword headers of ``stamp()`` over the visitor's, both over the stamps the signature already
had -- and two list values are joined; with ``append_stamps=True`` duplicated stamps are gathered
into a list instead.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from .canvas import Signature

__all__ = ["StampingVisitor", "linked_signatures", "merge_stamps", "split_options", "stamp_signature",
           "with_signature"]

STAMPED_HEADERS = "stamped_headers"


class StampingVisitor:
    """Celery's stamping visitor: override the hooks for the canvas parts you want to stamp.

    Each ``on_*`` hook that returns a dict returns the stamps to add (``{name: value}``; an
    optional ``"stamped_headers"`` list names which keys are stamps, by default all of them).
    """

    def on_group_start(self, group: Any, **headers: Any) -> Dict[str, Any]:
        return {}

    def on_group_end(self, group: Any, **headers: Any) -> None:
        return None

    def on_chain_start(self, chain: Any, **headers: Any) -> Dict[str, Any]:
        return {}

    def on_chain_end(self, chain: Any, **headers: Any) -> None:
        return None

    def on_signature(self, sig: Any, **headers: Any) -> Dict[str, Any]:
        """Stamps for one task signature (the only hook a visitor must give, as in Celery)."""
        raise NotImplementedError("a StampingVisitor must implement on_signature()")

    def on_chord_header_start(self, sig: Any, **headers: Any) -> Dict[str, Any]:
        return self.on_group_start(sig.tasks, **headers)

    def on_chord_header_end(self, sig: Any, **headers: Any) -> None:
        self.on_group_end(sig.tasks, **headers)

    def on_chord_body(self, sig: Any, **headers: Any) -> Dict[str, Any]:
        return {}

    def on_callback(self, callback: Any, **headers: Any) -> Dict[str, Any]:
        return {}

    def on_errback(self, errback: Any, **headers: Any) -> Dict[str, Any]:
        return {}


def merge_stamps(into: Dict[str, Any], other: Optional[Dict[str, Any]], append: bool) -> None:
    """Merge ``other`` into ``into`` by Celery's rules (``celery.canvas._merge_dictionaries``): a key only
    in ``other`` is added; for a key in both, dicts merge (gathering), two lists are joined, and any
    other duplicate keeps ``into``'s value -- unless ``append``, which gathers both values into a list
    (``into``'s first)."""
    if not other:
        return
    for key, value in list(into.items()):
        if key not in other:
            continue
        theirs = other[key]
        if isinstance(value, dict) and isinstance(theirs, dict):
            merge_stamps(value, theirs, True)
            continue
        if append and isinstance(value, (int, float, str)):
            value = into[key] = [value]
        if isinstance(value, list) and isinstance(theirs, list):
            value.extend(item for item in theirs if not (key == STAMPED_HEADERS and item in value))
        elif append:
            gathered = [] if value is None else list(value)
            gathered.append(theirs)
            into[key] = gathered
    for key, theirs in other.items():
        if key not in into:
            into[key] = theirs


def _names(headers: Dict[str, Any]) -> List[str]:
    given = headers.get(STAMPED_HEADERS)
    if given is None:
        return [k for k in headers if k != STAMPED_HEADERS]
    return list(given) if isinstance(given, (list, tuple)) else [given]


def _unique(names: List[str]) -> List[str]:
    return list(dict.fromkeys(n for n in names if n != STAMPED_HEADERS))


def collect(sig: Signature, visitor_headers: Optional[Dict[str, Any]], append: bool, own: bool,
            headers: Dict[str, Any]) -> Dict[str, Any]:
    """The stamps for ``sig``: the given ``headers``, then the visitor's, then (``own``) the stamps
    ``sig`` already carries; ``stamped_headers`` names them all."""
    merged = dict(headers)
    merged[STAMPED_HEADERS] = _names(merged)
    if visitor_headers is not None:
        visitor = dict(visitor_headers)
        visitor[STAMPED_HEADERS] = _names(visitor)
        merge_stamps(merged, visitor, append)
    if own:
        names = _unique(list(merged[STAMPED_HEADERS]) + list(sig.options.get(STAMPED_HEADERS) or []))
        mine = {k: v for k, v in sig.options.items() if k in names}
        merged[STAMPED_HEADERS] = names
        merge_stamps(merged, mine, append)
    merged[STAMPED_HEADERS] = _unique(list(merged[STAMPED_HEADERS]))
    return merged


def _as_list(value: Any) -> List[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def stamp_links(sig: Signature, visitor: Any, append: bool, headers: Dict[str, Any]) -> None:
    """Stamp ``sig``'s callbacks (``on_callback``) and errbacks (``on_errback``) with ``headers``
    and the visitor's stamps, not with ``sig``'s own (as in Celery)."""
    from .canvas import maybe_signature

    for key, hook in (("link", "on_callback"), ("link_error", "on_errback")):
        found = sig.options.get(key)
        if not found:
            continue
        given = copy.deepcopy(headers)
        linked = []
        for link in _as_list(found):
            link = maybe_signature(link, app=sig._app)
            extra = (getattr(visitor, hook)(link, **given) or {}) if visitor is not None else None
            given = collect(sig, extra, append, False, given)
            stamp_signature(link, visitor, append, given)
            linked.append(link)
        sig.options[key] = linked


def stamp_signature(sig: Signature, visitor: Any = None, append: bool = False,
                    headers: Optional[Dict[str, Any]] = None) -> None:
    """``sig.stamp(visitor, append_stamps, **headers)``: stamp ``sig`` and what it runs, in place."""
    from .canvas import _chain, chord, group

    headers = dict(headers or {})
    if isinstance(sig, (_chain, group)):
        hook = "chain" if isinstance(sig, _chain) else "group"
        extra = (getattr(visitor, f"on_{hook}_start")(sig, **headers) or {}) if visitor is not None else None
        headers = collect(sig, extra, append, True, headers)
        stamp_links(sig, visitor, append, headers)
        tasks = sig.tasks
        for task in tasks:
            stamp_signature(task, visitor, append, headers)
        sig["kwargs"]["tasks"] = tasks
        if visitor is not None:
            getattr(visitor, f"on_{hook}_end")(sig, **headers)
        return
    if isinstance(sig, chord):
        extra = (visitor.on_chord_header_start(sig, **headers) or {}) if visitor is not None else None
        headers = collect(sig, extra, append, True, headers)
        stamp_links(sig, visitor, append, headers)
        header = sig.header
        tasks = header.tasks
        for task in tasks:
            stamp_signature(task, visitor, append, dict(headers))
        header["kwargs"]["tasks"] = tasks
        sig["kwargs"]["header"] = header
        if visitor is not None:
            visitor.on_chord_header_end(sig, **headers)
        body = sig.body
        if visitor is not None and body is not None:
            headers = collect(sig, visitor.on_chord_body(sig, **headers) or {}, append, True, headers)
            stamp_signature(body, visitor, append, headers)
            sig["kwargs"]["body"] = body
        return
    stamp_links(sig, visitor, append, headers)
    extra = (visitor.on_signature(sig, **headers) or {}) if visitor is not None else None
    sig.set(**collect(sig, extra, append, True, headers))


def split_options(options: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Publish options without their stamps, and the stamp headers (``stamped_headers``, ``stamps``)
    to add to the message's headers (empty when the call is not stamped)."""
    names = options.get(STAMPED_HEADERS)
    if names is None:
        return options, {}
    names = _as_list(names)
    rest = {k: v for k, v in options.items() if k != STAMPED_HEADERS and k not in names}
    return rest, {STAMPED_HEADERS: list(names), "stamps": {n: options.get(n) for n in names}}


#: Key of a compiled callback's plan holding its stamped signature (for the task's request.callbacks).
SIGNATURE_KEY = "celery_signature"


def with_signature(plan: Dict[str, Any], sig: Signature) -> Dict[str, Any]:
    """``plan`` (a callback's) carrying ``sig`` as plain data when ``sig`` is stamped, so the task it is
    linked to sees it in ``request.callbacks``/``errbacks`` with its stamps (as in a Celery message)."""
    if sig.options.get(STAMPED_HEADERS) is not None:
        plan[SIGNATURE_KEY] = json.loads(json.dumps(sig, default=repr))
    return plan


def linked_signatures(node: Dict[str, Any]) -> Dict[str, Any]:
    """The ``callbacks``/``errbacks`` call metadata of a task node: its stamped callbacks' signatures."""
    out: Dict[str, Any] = {}
    for key, name in (("link", "callbacks"), ("link_error", "errbacks")):
        found = [p[SIGNATURE_KEY] for p in node.get(key) or [] if isinstance(p, dict) and p.get(SIGNATURE_KEY)]
        if found:
            out[name] = found
    return out
