"""Messages to a running workflow: signals, queries, updates, message streams.

As in ``durable_workflow.sync`` 2.12, ``args`` is one list of positional arguments and the
three calls return the server's JSON response (queries and updates with ``"result"`` decoded
from its Avro envelope, exact to the int64). Signals and updates carry a ``request_id``
(generated once per call when omitted), so a transport retry is the same command.
"""

from __future__ import annotations

import uuid
from typing import Any, Dict, List, Optional

from .. import payloads
from .base import ClientBase, segment
from .negotiation import update_wait_for_values
from .results._common import body_of, decode_payload
from .transport import RetryMode
from .workflows import args_list


def _base(workflow_id: str, run_id: Optional[str]) -> str:
    return f"/workflows/{segment(workflow_id)}" + (f"/runs/{segment(run_id)}" if run_id else "")


def _hydrate_result(response: Dict[str, Any]) -> Dict[str, Any]:
    envelope = response.get("result_envelope")
    if isinstance(envelope, dict) and ("blob" in envelope or "external_storage" in envelope):
        response["result"] = decode_payload(envelope)
    elif isinstance(response.get("result"), dict) and (
            "blob" in response["result"] or "external_storage" in response["result"]):
        response["result"] = decode_payload(response["result"])
    return response


class MessagesMixin(ClientBase):
    """Signal, query, update and message-stream routes."""

    def signal_workflow(
        self,
        workflow_id: str,
        signal_name: str,
        *,
        args: Optional[List[Any]] = None,
        request_id: Optional[str] = None,
        run_id: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Record a signal; returns the admission receipt (always with ``request_id``)."""
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise ValueError("run_id must be a non-empty string when provided")
        arguments = args_list(args)
        body: Dict[str, Any] = {}
        if arguments:
            body["input"] = payloads.envelope(arguments)
        body["request_id"] = request_id or f"sync-worker-signal-{uuid.uuid4().hex}"
        call = self._call_about("workflow.signal", workflow_id, body, name=signal_name, run_id=run_id)
        response = body_of(self._workflow_call(call, lambda sent: self._call(
            "control", "POST", f"{_base(workflow_id, run_id)}/signal/{segment(signal_name)}",
            route="/workflows/{id}/signal/{name}", body=sent, operation="workflow.signal")))
        response.setdefault("request_id", body["request_id"])
        return response

    def query_workflow(self, workflow_id: str, query_name: str, *, args: Optional[List[Any]] = None,
                       run_id: Optional[str] = None) -> Dict[str, Any]:
        """Ask the workflow's worker a query; the answer is ``response["result"]``."""
        arguments = args_list(args)
        body: Dict[str, Any] = {}
        if arguments:
            body["input"] = payloads.envelope(arguments)
        call = self._call_about("workflow.query", workflow_id, body, name=query_name, run_id=run_id)
        response = body_of(self._workflow_call(call, lambda sent: self._call(
            "control", "POST", f"{_base(workflow_id, run_id)}/query/{segment(query_name)}",
            route="/workflows/{id}/query/{name}", body=sent, retry=RetryMode.CONNECT_ONLY,
            operation="workflow.query")))
        return _hydrate_result(response)

    def update_workflow(
        self,
        workflow_id: str,
        update_name: str,
        *,
        args: Optional[List[Any]] = None,
        wait_for: Optional[str] = None,
        wait_timeout_seconds: Optional[int] = None,
        request_id: Optional[str] = None,
        run_id: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Apply an update; ``wait_for`` ``"accepted"`` (the server's default) or ``"completed"``.

        The response carries ``result`` (decoded) once completed, and ``request_id``.
        """
        allowed = update_wait_for_values(self.cluster_info())
        if allowed is not None and (wait_for or "accepted") not in allowed:
            raise ValueError(f"wait_for={wait_for!r} is not one of the server's values {allowed}")
        arguments = args_list(args)
        body: Dict[str, Any] = {}
        if arguments:
            body["input"] = payloads.envelope(arguments)
        if wait_for is not None:
            body["wait_for"] = wait_for
        if wait_timeout_seconds is not None:
            body["wait_timeout_seconds"] = int(wait_timeout_seconds)
        body["request_id"] = request_id or f"sync-worker-update-{uuid.uuid4().hex}"
        call = self._call_about("workflow.update", workflow_id, body, name=update_name, run_id=run_id)
        response = body_of(self._workflow_call(call, lambda sent: self._call(
            "control", "POST", f"{_base(workflow_id, run_id)}/update/{segment(update_name)}",
            route="/workflows/{id}/update/{name}", body=sent, operation="workflow.update")))
        response.setdefault("request_id", body["request_id"])
        return _hydrate_result(response)

    def append_message_stream(
        self, workflow_id: str, stream_name: str, *args: Any, message_id: Optional[str] = None
    ) -> Dict[str, Any]:
        """Append one message to a workflow's durable message stream (``message_id`` deduplicates)."""
        body: Dict[str, Any] = {"message_id": message_id or f"sync-worker-message-{uuid.uuid4().hex}"}
        if args:
            body["input"] = payloads.envelope(list(args))
        response = body_of(self._call(
            "control", "POST", f"/workflows/{segment(workflow_id)}/message-streams/{segment(stream_name)}/messages",
            route="/workflows/{id}/message-streams/{stream}/messages", body=body, operation="workflow.message_stream",
        ))
        response.setdefault("message_id", body["message_id"])
        return response
