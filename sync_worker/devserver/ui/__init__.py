"""A web UI for the dev server at ``/ui/``: workflows, a run's history, standalone activities,
workers and task queues, with signal / cancel / terminate actions.

Server-rendered HTML with a little plain JavaScript (no build step, no CDN), served by the dev
server itself on its own port. Pages read through the same control-plane code as the JSON API.
Every value is HTML-escaped; pages carry a strict Content-Security-Policy (no inline script);
when the server has a token, only the token prompt renders until the browser signs in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, unquote

from ..engine import Engine
from ..util import ApiError
from . import actions, views
from .html import CSS, JS, Html, href, layout, quote_id
from .session import Session

__all__ = ["UI", "UiResponse"]

_SECURITY_HEADERS = [
    ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'"),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
]
_RUN = re.compile(r"^/ui/workflows/(?P<workflow_id>[^/]+)$")
_ACTION = re.compile(r"^/ui/workflows/(?P<workflow_id>[^/]+)/(?P<action>signal|cancel|terminate)$")
_LISTS: Dict[str, Callable[[Engine, str, Dict[str, str]], Tuple[str, Html]]] = {
    "/ui/workflows": views.workflows_page,
    "/ui/activities": views.activities_page,
    "/ui/workers": views.workers_page,
    "/ui/task-queues": views.task_queues_page,
    "/ui/schedules": views.schedules_page,
}


@dataclass
class UiResponse:
    status: int
    body: bytes
    headers: List[Tuple[str, str]] = field(default_factory=list)
    content_type: str = "text/html; charset=utf-8"


def _redirect(location: str, *extra: Tuple[str, str]) -> UiResponse:
    return UiResponse(303, b"", [("Location", location), *extra])


class UI:
    """Answers every request under ``/ui``; ``handle`` never raises for bad input."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        config = engine.config
        self.session = Session([config.token, config.control_token],
                               required=bool(config.token or config.control_token or config.worker_token))

    def handle(self, method: str, raw_path: str, query_string: str, headers: Any, body: bytes) -> UiResponse:
        path = unquote(raw_path).rstrip("/") or "/ui"
        query = {k: v[0] for k, v in parse_qs(query_string, keep_blank_values=True).items()}
        form: Dict[str, str] = {}
        if method == "POST":
            form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
        try:
            response = self._route(method, path, query, form, headers)
        except ApiError as error:
            response = self._page(error.status, "Not found" if error.status == 404 else "Refused",
                                  views.not_found(error), query.get("namespace") or form.get("namespace"))
        response.headers.extend(_SECURITY_HEADERS)
        return response

    # -- routing ------------------------------------------------------------------------------
    def _route(self, method: str, path: str, query: Dict[str, str], form: Dict[str, str], headers: Any) -> UiResponse:
        if path == "/ui/static/app.css":
            return UiResponse(200, CSS.encode("utf-8"), content_type="text/css; charset=utf-8")
        if path == "/ui/static/app.js":
            return UiResponse(200, JS.encode("utf-8"), content_type="text/javascript; charset=utf-8")
        if path == "/ui/login":
            return self._login(method, form)
        if not self.session.authenticated(headers):
            if method == "GET":
                return _redirect(href("/ui/login"))
            return self._login_form(401, "Sign in first: this dev server requires its token.")
        if path == "/ui/logout" and method == "POST":
            return _redirect("/ui/login", ("Set-Cookie", self.session.clear_cookie_header()))
        namespace = self._namespace(query.get("namespace") or form.get("namespace"))
        if path == "/ui":
            return _redirect(href("/ui/workflows", namespace=namespace))
        if method == "GET" and path in _LISTS:
            title, body = _LISTS[path](self.engine, namespace, query)
            return self._page(200, title, body, namespace, section=path.rsplit("/", 1)[1], flash=query.get("flash"))
        found = _RUN.match(path)
        if method == "GET" and found:
            return self._run(namespace, found.group("workflow_id"), query.get("run_id") or None, query.get("flash"))
        found = _ACTION.match(path)
        if method == "POST" and found:
            return self._act(namespace, found.group("workflow_id"), found.group("action"), form)
        if path in _LISTS or _RUN.match(path) or _ACTION.match(path):
            raise ApiError(405, "method_not_allowed", f"{method} is not allowed on {path}")
        raise ApiError(404, "route_not_found", f"no page at {path}")

    def _namespace(self, requested: Optional[str]) -> str:
        known = self.namespaces()
        if not requested:
            return known[0] if known else "default"
        if requested.lower() not in known:
            raise ApiError(404, "namespace_not_found", f"namespace {requested!r} is not served here")
        return requested.lower()

    def namespaces(self) -> List[str]:
        return list(self.engine.namespaces)

    # -- pages --------------------------------------------------------------------------------
    def _page(self, status: int, title: str, body: Html, namespace: Optional[str], *, section: str = "workflows",
              flash: Optional[str] = None, error: Optional[str] = None) -> UiResponse:
        known = self.namespaces()
        shown = namespace if namespace in known else (known[0] if known else "default")
        page = layout(title, body, namespace=shown, namespaces=known, section=section, flash=flash, error=error)
        return UiResponse(status, page)

    def _run(self, namespace: str, workflow_id: str, run_id: Optional[str], flash: Optional[str],
             error: Optional[str] = None, status: int = 200) -> UiResponse:
        title, body, is_open = views.run_page(self.engine, namespace, workflow_id, run_id)
        if is_open:
            body = Html(body + actions.action_forms(workflow_id, namespace, run_id, self.session.csrf()))
        return self._page(status, title, body, namespace, flash=flash, error=error)

    def _act(self, namespace: str, workflow_id: str, action: str, form: Dict[str, str]) -> UiResponse:
        if not self.session.csrf_ok(form.get("csrf")):
            return self._page(403, "Refused", Html('<p class="empty">This form expired or did not come from this '
                                                   "page: reload the run's page and try again.</p>"), namespace)
        run_id = form.get("run_id") or None
        try:
            actions.validate(action, form)
        except actions.UiInputError as problem:
            return self._run(namespace, workflow_id, run_id, None, error=str(problem), status=400)
        if form.get("confirm") != "yes":
            views.run_page(self.engine, namespace, workflow_id, run_id)  # 404 for a run that is not there
            return self._page(200, f"Confirm: {action} {workflow_id}", actions.confirm_page(action, workflow_id, form),
                              namespace)
        try:
            message = actions.perform(self.engine, namespace, action, workflow_id, form)
        except ApiError as refused:
            if refused.status == 404:
                raise
            return self._run(namespace, workflow_id, run_id, None, error=f"Refused: {refused.message}",
                             status=refused.status)
        return _redirect(href(f"/ui/workflows/{quote_id(workflow_id)}", namespace=namespace,
                              run_id=run_id or None, flash=message))

    # -- access -------------------------------------------------------------------------------
    def _login(self, method: str, form: Dict[str, str]) -> UiResponse:
        if not self.session.required:
            return _redirect("/ui/workflows")
        if method == "POST":
            if self.session.token_matches(form.get("token", "")):
                return _redirect("/ui/workflows", ("Set-Cookie", self.session.set_cookie_header()))
            return self._login_form(401, "That token is not this server's token.")
        return self._login_form(200, None)

    def _login_form(self, status: int, error: Optional[str]) -> UiResponse:
        body = Html('<p>This dev server requires its token (the <code>--token</code> it was started with).</p>'
                    '<form method="post" action="/ui/login" id="login-form">'
                    '<label>Token <input type="password" name="token" autocomplete="current-password" required>'
                    '</label> <button type="submit">Sign in</button></form>')
        page = layout("Sign in", body, namespace="", namespaces=[], section="", error=error, authenticated=False)
        return UiResponse(status, page)

