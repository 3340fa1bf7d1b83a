"""The dev server UI's pages over real sockets (no browser): links between runs, task failures in
plain words, refusals as pages with a 4xx status, and no 5xx for malformed requests."""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Optional, Tuple

from sync_worker import Client, workflow
from sync_worker.client import ScheduleAction, ScheduleSpec
from sync_worker.devserver import DevServer

from ._worker_support import RunningWorker, make_worker, unique_queue, wait_for


@workflow.defn(name="ui.child")
class Child:
    def run(self, ctx: Any, n: int) -> Any:
        return n * 2
        yield  # a generator workflow


@workflow.defn(name="ui.parent")
class Parent:
    def run(self, ctx: Any) -> Any:
        doubled = yield ctx.start_child_workflow("ui.child", [21])
        return doubled


@workflow.defn(name="ui.looper")
class Looper:
    def run(self, ctx: Any, left: int) -> Any:
        if left > 0:
            return ctx.continue_as_new(left - 1)
        return "done"
        yield


class Opaque:
    """A value the payload codec cannot carry: returning it fails the workflow task, not the run."""


@workflow.defn(name="ui.broken")
class Broken:
    def run(self, ctx: Any) -> Any:
        return {"<oops>": Opaque()}
        yield


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def fetch(url: str, form: Optional[Dict[str, str]] = None, headers: Optional[Dict[str, str]] = None
          ) -> Tuple[int, str, Any]:
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with _opener.open(request, timeout=15) as response:
            return response.status, response.read().decode(), response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), error.headers


def _run_ids(server: DevServer, workflow_id: str) -> list:
    with server.engine.tx():
        return [r["run_id"] for r in server.engine.runs_of("default", workflow_id)]


def _current(server: DevServer, workflow_id: str) -> Dict[str, Any]:
    with server.engine.tx():
        return dict(server.engine.require_run("default", workflow_id, None))


def test_child_runs_continue_as_new_chain_and_task_failures(dev_server: DevServer) -> None:
    client = Client(dev_server.url)
    queue = unique_queue("ui")
    worker = make_worker(client, task_queue=queue, workflows=[Parent, Child, Looper, Broken])
    with RunningWorker(worker):
        client.start_workflow("ui.parent", task_queue=queue, workflow_id="ui-parent")
        client.start_workflow("ui.looper", 2, task_queue=queue, workflow_id="ui-looper")
        client.start_workflow("ui.broken", task_queue=queue, workflow_id="ui-broken")
        wait_for(lambda: client.describe_workflow("ui-parent").status == "completed", timeout=20)
        wait_for(lambda: client.describe_workflow("ui-looper").status == "completed", timeout=20)
        wait_for(lambda: _current(dev_server, "ui-broken").get("last_task_failure"), timeout=20)

        status, page, _ = fetch(dev_server.url + "/ui/workflows/ui-parent")
        assert status == 200
        child_link = re.search(r'<h2>Child runs</h2><p><a href="(/ui/workflows/[^"]+)">', page)
        assert child_link is not None
        status, child_page, _ = fetch(dev_server.url + child_link.group(1).replace("&amp;", "&"))
        assert status == 200 and "ui.child" in child_page and 'Parent: <a href="/ui/workflows/ui-parent' in child_page

        runs = _run_ids(dev_server, "ui-looper")
        assert len(runs) == 3
        status, page, _ = fetch(dev_server.url + f"/ui/workflows/ui-looper?run_id={runs[0]}")
        assert "Continue-as-new chain" in page
        for run_id in runs:
            assert f"run_id={run_id}" in page
        assert "WorkflowContinuedAsNew" in page

        status, page, _ = fetch(dev_server.url + "/ui/workflows/ui-broken")
        assert status == 200
        assert "The last workflow task failed." in page
        assert "PayloadEncodeError" in page and "Opaque is not a payload value" in page
        assert "&lt;oops&gt;" in page and "<oops>" not in page  # in plain words, escaped


def test_refusals_are_pages_with_4xx_and_nothing_changes(dev_server: DevServer) -> None:
    client = Client(dev_server.url)
    queue = unique_queue("ui")
    client.start_workflow("ui.parent", task_queue=queue, workflow_id="ui-open")
    base = dev_server.url
    assert fetch(base + "/ui/workflows/nope")[0] == 404
    assert fetch(base + "/ui/workflows?namespace=elsewhere")[0] == 404
    assert fetch(base + "/ui/nowhere")[0] == 404
    assert fetch(base + "/ui/workflows", form={"x": "1"})[0] == 405
    # A form without the page's CSRF token is refused and the run is untouched.
    status, page, _ = fetch(base + "/ui/workflows/ui-open/terminate", form={"namespace": "default", "confirm": "yes"})
    assert status == 403 and "did not come from this page" in page
    assert client.describe_workflow("ui-open").status not in ("terminated",)
    status, page, headers = fetch(base + "/ui/workflows/ui-open")
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert csrf is not None
    assert "default-src 'self'" in headers["Content-Security-Policy"] and headers["X-Frame-Options"] == "DENY"
    # Unconfirmed: a confirmation page, nothing done yet.
    status, page, _ = fetch(base + "/ui/workflows/ui-open/terminate",
                            form={"namespace": "default", "csrf": csrf.group(1)})
    assert status == 200 and 'id="confirm"' in page
    assert client.describe_workflow("ui-open").status != "terminated"
    status, _, headers = fetch(base + "/ui/workflows/ui-open/terminate",
                               form={"namespace": "default", "csrf": csrf.group(1), "confirm": "yes"})
    assert status == 303 and "flash=" in headers["Location"]
    assert client.describe_workflow("ui-open").status == "terminated"
    # Acting on a closed run is refused with the server's reason, as a page.
    status, page, _ = fetch(base + "/ui/workflows/ui-open/cancel",
                            form={"namespace": "default", "csrf": csrf.group(1), "confirm": "yes"})
    assert status == 409 and "is not active" in page


def test_malformed_requests_never_get_a_5xx(dev_server: DevServer) -> None:
    base = dev_server.url
    odd = ["/ui/workflows/%00", "/ui/workflows/%ff%fe", "/ui/workflows?page=-3&status=<x>", "/ui/workflows?page=abc",
           "/ui/workflows/" + "a" * 5000, "/ui/static/../../etc/passwd", "/ui/workflows/x/signal",
           "/ui/login", "/ui/workflows?namespace=%00"]
    for path in odd:
        status = fetch(base + path)[0]
        assert status < 500, path
    for form in ({"name": "", "arguments": "[]"}, {"name": "x", "arguments": "{" * 5000},
                 {"name": "x", "arguments": "[1e999]"}, {"\x00": "\x00"}):
        assert fetch(base + "/ui/workflows/none/signal", form=form)[0] < 500


def test_token_protects_every_page_and_action() -> None:
    with DevServer(port=0, db=":memory:", token="tok-1") as server:
        client = Client(server.url, token="tok-1")
        client.start_workflow("ui.parent", task_queue="q", workflow_id="secret-run")
        for path in ("/ui/", "/ui/workflows", "/ui/workflows/secret-run", "/ui/workers"):
            status, page, headers = fetch(server.url + path)
            assert status == 303 and headers["Location"] == "/ui/login"
            assert "secret-run" not in page
        status, page, _ = fetch(server.url + "/ui/workflows/secret-run/terminate", form={"confirm": "yes"})
        assert status == 401 and "secret-run" not in page
        assert client.describe_workflow("secret-run").status != "terminated"
        status, _, headers = fetch(server.url + "/ui/login", form={"token": "tok-1"})
        assert status == 303 and "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
        cookie = headers["Set-Cookie"].split(";", 1)[0]
        status, page, _ = fetch(server.url + "/ui/workflows", headers={"Cookie": cookie})
        assert status == 200 and "secret-run" in page
        assert fetch(server.url + "/ui/workflows", headers={"Cookie": "sw_ui_session=forged"})[0] == 303


def test_role_tokens_the_operator_token_signs_in_the_worker_token_does_not() -> None:
    with DevServer(port=0, db=":memory:", worker_token="w-tok", control_token="c-tok") as server:
        status, page, _ = fetch(server.url + "/ui/login", form={"token": "w-tok"})
        assert status == 401 and "not this server" in page and 'id="login-form"' in page
        status, _, headers = fetch(server.url + "/ui/login", form={"token": "c-tok"})
        assert status == 303 and headers["Location"] == "/ui/workflows"
        cookie = headers["Set-Cookie"].split(";", 1)[0]
        assert "c-tok" not in cookie
        assert fetch(server.url + "/ui/workflows", headers={"Cookie": cookie})[0] == 200


def test_schedules_and_worker_status_blocks_are_shown(dev_server: DevServer) -> None:
    client = Client(dev_server.url)
    queue = unique_queue("ui")
    client.create_schedule(schedule_id="nightly-report", spec=ScheduleSpec(intervals=[{"every": "PT1H"}]),
                           action=ScheduleAction(workflow_type="ui.child", task_queue=queue, input=[1]))
    status, page, _ = fetch(dev_server.url + "/ui/schedules")
    assert status == 200 and "nightly-report" in page and "ui.child" in page and "PT1H" in page
    worker = make_worker(client, task_queue=queue, workflows=[Child])
    with RunningWorker(worker):
        status, page, _ = fetch(dev_server.url + "/ui/workers")
        assert status == 200 and queue in page and "free slots: activity" in page
