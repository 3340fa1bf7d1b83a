"""The Client's request/response transform: offload large blobs going out, resolve references coming in.

Written once for every route: ``ClientBase._call`` passes each JSON body through
:meth:`PayloadOffload.outbound` and each answer through :meth:`PayloadOffload.inbound`, so
starts, signals, updates, activity results, workflow commands (results, activity and child
arguments, continue-as-new), histories, describe and result answers all behave the same and
the runtime above only ever sees ``{codec, blob}``. This is how the SDK does it per call
(``Client``/``Worker`` pass ``external_storage`` to every ``serializer.decode_envelope`` and
use ``external_storage_envelope`` for outgoing payloads); here it is one walk of the body.

Only exact payload envelopes are touched (``{"codec": "avro", "blob": <str>}`` out, ``{codec,
external_storage}`` in); user data is inside blobs, so it can never look like one. Memo and
search attributes stay inline (the server indexes them), as in the SDK.
"""

from __future__ import annotations

from typing import Any, Optional

from ..errors.external_payloads import ExternalPayloadError
from . import (
    ExternalPayloadCache,
    ExternalStorageDriver,
    is_reference_envelope,
    reference_envelope,
    resolve_envelope,
    store_external_payload,
)

__all__ = ["PayloadOffload", "UnresolvedReference", "resolve_references"]


class UnresolvedReference(dict):  # type: ignore[type-arg]
    """A reference envelope whose fetch failed, kept in place with its error.

    A worker task is not lost to a poll error: the error is raised again, typed, where the
    payload is decoded (an activity's arguments, a history event), which fails that attempt
    or workflow task with the reason, as an undecodable blob would.
    """

    def __init__(self, envelope: Any, error: ExternalPayloadError) -> None:
        super().__init__(envelope)
        self.error = error

#: fields whose payloads the server reads itself: never offloaded
_INLINE_KEYS = frozenset({"memo", "search_attributes", "upsert_search_attributes", "entries", "attributes"})


class PayloadOffload:
    """One driver, threshold and cache, as configured on a Client (or a Worker's client)."""

    def __init__(self, driver: ExternalStorageDriver, threshold_bytes: Optional[int],
                 cache: Optional[ExternalPayloadCache] = None) -> None:
        if threshold_bytes is not None and (type(threshold_bytes) is not int or threshold_bytes < 1):
            raise ValueError("external_storage_threshold_bytes must be an int of at least 1 when provided")
        self.driver = driver
        self.threshold_bytes = threshold_bytes
        self.cache = cache if cache is not None else ExternalPayloadCache()

    def outbound(self, body: Any) -> Any:
        """``body`` with every blob over the threshold replaced by a stored reference.

        Without a threshold nothing is offloaded (references are still read), as in the SDK.
        """
        if self.threshold_bytes is None or body is None:
            return body
        return self._out(body, self.threshold_bytes)

    def _out(self, node: Any, threshold: int) -> Any:
        if isinstance(node, dict):
            blob = node.get("blob")
            if isinstance(blob, str) and node.get("codec") == "avro" and len(node) == 2:
                if len(blob) <= threshold:
                    return node
                reference = store_external_payload(self.driver, blob.encode("ascii"))
                self.cache.put(reference, blob.encode("ascii"))  # we wrote these bytes: a replay need not fetch
                return reference_envelope(reference)
            changed = None
            for key, value in node.items():
                if key in _INLINE_KEYS or not isinstance(value, (dict, list)):
                    continue
                new = self._out(value, threshold)
                if new is not value:
                    if changed is None:
                        changed = dict(node)
                    changed[key] = new
            return node if changed is None else changed
        if isinstance(node, list):
            items = [self._out(v, threshold) if isinstance(v, (dict, list)) else v for v in node]
            return node if all(a is b for a, b in zip(items, node)) else items
        return node

    def inbound(self, body: Any, *, defer_errors: bool = False) -> Any:
        """``body`` with every ``{codec, external_storage}`` replaced by the verified ``{codec, blob}``.

        ``defer_errors`` (worker-plane answers): a reference that cannot be read stays as an
        :class:`UnresolvedReference` and raises where it is decoded; otherwise the error is raised now.
        """
        return resolve_references(body, self.driver, self.cache, defer_errors=defer_errors)


def resolve_references(node: Any, driver: Optional[ExternalStorageDriver],
                       cache: Optional[ExternalPayloadCache] = None, *, defer_errors: bool = False) -> Any:
    """Resolve every reference envelope inside ``node`` (a new structure where one changed)."""
    if isinstance(node, dict):
        if is_reference_envelope(node) and not isinstance(node, UnresolvedReference):
            try:
                return resolve_envelope(node, driver, cache=cache)
            except ExternalPayloadError as error:
                if not defer_errors:
                    raise
                return UnresolvedReference(node, error)
        changed = None
        for key, value in node.items():
            if not isinstance(value, (dict, list)):
                continue
            new = resolve_references(value, driver, cache, defer_errors=defer_errors)
            if new is not value:
                if changed is None:
                    changed = dict(node)
                changed[key] = new
        return node if changed is None else changed
    if isinstance(node, list):
        items = [resolve_references(v, driver, cache, defer_errors=defer_errors) if isinstance(v, (dict, list))
                 else v for v in node]
        return node if all(a is b for a, b in zip(items, node)) else items
    return node
