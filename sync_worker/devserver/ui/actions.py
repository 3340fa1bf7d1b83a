"""Actions from the UI: signal, cancel and terminate a run, each confirmed first.

The forms on a run's page post here; the first post renders a confirmation page that repeats
what will happen, and only the confirmed post acts, through the same control-plane functions
as the HTTP API (``control.signal`` / ``control.cancel``) under the engine's transaction.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from ... import payloads
from .. import control
from ..engine import Engine
from ..util import ApiError
from .html import Html, esc, quote_id

__all__ = ["ACTIONS", "UiInputError", "action_forms", "confirm_page", "perform"]

ACTIONS = ("signal", "cancel", "terminate")


class UiInputError(ValueError):
    """What the user typed cannot be acted on; shown on the page, nothing is changed."""


def _hidden(name: str, value: Any) -> str:
    return f'<input type="hidden" name="{esc(name)}" value="{esc(value)}">'


def action_forms(workflow_id: str, namespace: str, run_id: Optional[str], csrf: str) -> Html:
    """The signal / cancel / terminate forms shown on an open run's page."""
    base = f"/ui/workflows/{esc(quote_id(workflow_id))}"
    common = _hidden("namespace", namespace) + _hidden("csrf", csrf) + (_hidden("run_id", run_id) if run_id else "")
    return Html(
        '<h2>Act on this run</h2>'
        f'<fieldset><legend>Signal</legend><form method="post" action="{base}/signal" id="signal-form">{common}'
        '<label>Name <input type="text" name="name" required></label> '
        '<label>Arguments (a JSON array, or one JSON value) <textarea name="arguments">[]</textarea></label>'
        '<button type="submit">Send signal…</button></form></fieldset>'
        f'<fieldset><legend>Cancel or terminate</legend><form method="post" action="{base}/cancel" class="inline"'
        f' id="cancel-form">{common}<label>Reason <input type="text" name="reason"></label> '
        '<button type="submit">Cancel run…</button></form> '
        f'<form method="post" action="{base}/terminate" class="inline" id="terminate-form">{common}'
        '<input type="hidden" name="reason" value="terminated from the dev server UI">'
        '<button type="submit" class="danger">Terminate run…</button></form></fieldset>'
    )



def parse_arguments(text: str) -> List[Any]:
    """The signal's arguments: a JSON array is the list, any other JSON value is one argument."""
    stripped = text.strip()
    if not stripped:
        return []
    try:
        value = json.loads(stripped)
    except ValueError as error:
        raise UiInputError(f"the arguments are not valid JSON: {error}") from None
    arguments = value if isinstance(value, list) else [value]
    try:
        payloads.encode(arguments)
    except Exception as error:
        raise UiInputError(f"the arguments cannot be sent: {error}") from None
    return arguments


def _describe(action: str, workflow_id: str, form: Dict[str, str]) -> str:
    if action == "signal":
        return (f"Send signal {form.get('name', '')!r} with arguments {form.get('arguments', '[]').strip() or '[]'} "
                f"to workflow {workflow_id}?")
    reason = form.get("reason") or "(no reason)"
    return f"{action.capitalize()} workflow {workflow_id}? Reason: {reason}"


def validate(action: str, form: Dict[str, str]) -> None:
    if action == "signal":
        if not (form.get("name") or "").strip():
            raise UiInputError("a signal needs a name")
        parse_arguments(form.get("arguments", ""))


def confirm_page(action: str, workflow_id: str, form: Dict[str, str]) -> Html:
    """What will happen, with the same fields and a Confirm button (and a way back)."""
    fields = "".join(_hidden(k, v) for k, v in form.items() if k != "confirm")
    back = f"/ui/workflows/{esc(quote_id(workflow_id))}?namespace={esc(quote_id(form.get('namespace', 'default')))}"
    css = "danger" if action == "terminate" else ""
    return Html(
        f'<p class="confirm-question">{esc(_describe(action, workflow_id, form))}</p>'
        f'<form method="post" action="/ui/workflows/{esc(quote_id(workflow_id))}/{esc(action)}" id="confirm-form">'
        f'{fields}{_hidden("confirm", "yes")}<button type="submit" class="{css}" id="confirm">Confirm</button> '
        f'<a href="{back}">Back</a></form>')


def perform(engine: Engine, namespace: str, action: str, workflow_id: str, form: Dict[str, str]) -> str:
    """Carry out a confirmed action and say what was done. Refusals raise ``ApiError``."""
    run_id = form.get("run_id") or None
    reason = (form.get("reason") or "").strip() or None
    with engine.tx():
        if action == "signal":
            name = form["name"].strip()
            arguments = parse_arguments(form.get("arguments", ""))
            receipt = control.signal(engine, namespace, workflow_id, run_id, name,
                                     {"input": payloads.envelope(arguments), "payload_codec": "avro"})
            return f"Signal {name!r} sent ({receipt.get('signal_id')})."
        if action in ("cancel", "terminate"):
            body: Dict[str, Any] = {"reason": reason} if reason else {}
            control.cancel(engine, namespace, workflow_id, run_id, body, terminate=action == "terminate")
            verb = "Terminated" if action == "terminate" else "Cancellation requested for"
            return f"{verb} workflow {workflow_id}."
    raise ApiError(404, "route_not_found", f"no UI action {action!r}")
