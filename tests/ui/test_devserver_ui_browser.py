"""The dev server's web UI driven in a real headless Chromium (Selenium + the system chromedriver).

A real dev server, a real worker on threads, real sockets: the browser lists workflows, opens a
run, reads the decoded history, signals, cancels, signs in with the token, and an XSS payload in
a workflow input renders as text. The run page screenshot in docs/ is produced here (set
``SYNC_WORKER_UI_SCREENSHOTS`` to a folder to keep the PNGs).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import uuid
from typing import Any, Callable, Iterator, Optional

import pytest

from sync_worker import Client, Worker, activity, workflow
from sync_worker.devserver import DevServer

from ..e2e._worker_support import RunningWorker, wait_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError:  # selenium needs Python 3.10+ (see setup.cfg's dev extra)
    webdriver = None  # type: ignore[assignment]

pytestmark = [
    pytest.mark.skipif(webdriver is None, reason="selenium is not installed (it needs Python 3.10+)"),
    pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                       reason="Chromium and chromedriver are not installed (scripts/prepare installs them as root)"),
]

QUEUE_PREFIX = "ui"


@activity.defn(name="ui.greet")
def greet(name: str) -> dict:
    return {"greeting": f"hello {name}", "letters": len(name)}


@workflow.defn(name="ui.greeter")
class Greeter:
    def run(self, ctx: Any, name: str) -> Any:
        result = yield ctx.schedule_activity("ui.greet", [name], start_to_close_timeout=30)
        return result


@workflow.defn(name="ui.approval")
class Approval:
    def __init__(self) -> None:
        self.approver: Optional[str] = None

    @workflow.signal("approve")
    def approve(self, who: str) -> None:
        self.approver = who

    def run(self, ctx: Any, note: str) -> Any:
        yield ctx.wait_condition(lambda: self.approver is not None, key="approval", timeout=3600)
        return {"approved_by": self.approver, "note": note}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="sw-ui-chromium-")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,1000", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _screenshot(driver: Any, name: str) -> None:
    folder = os.environ.get("SYNC_WORKER_UI_SCREENSHOTS") or tempfile.gettempdir()
    os.makedirs(folder, exist_ok=True)
    assert driver.save_screenshot(os.path.join(folder, name))


def _until(driver: Any, check: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except Exception:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"browser condition not met within {timeout}s; page was:\n{driver.page_source[:3000]}")
        time.sleep(0.1)


def _history_len(server: DevServer, workflow_id: str) -> int:
    engine = server.engine
    with engine.tx():
        return len(engine.history(engine.require_run("default", workflow_id, None)["run_id"]))


def _worker(server: DevServer, queue: str) -> Worker:
    return Worker(Client(server.url, token=server.config.token), task_queue=queue, workflows=[Greeter, Approval],
                  activities=[greet], pool="threads")


def _ui_server(**kwargs: Any) -> DevServer:
    return DevServer(port=0, db=":memory:", workflow_task_lease_seconds=10, **kwargs)


def test_list_to_run_page_shows_the_decoded_activity_result(browser: Any) -> None:
    queue = f"{QUEUE_PREFIX}-{uuid.uuid4().hex[:8]}"
    with _ui_server() as server:
        client = Client(server.url)
        with RunningWorker(_worker(server, queue)):
            client.start_workflow("ui.greeter", "Ada", task_queue=queue, workflow_id="greet-ada")
            wait_for(lambda: client.describe_workflow("greet-ada").status == "completed", timeout=20)
        browser.get(server.url + "/ui/")
        assert "/ui/workflows" in browser.current_url
        browser.find_element(By.LINK_TEXT, "greet-ada").click()
        _until(browser, lambda: "Workflow greet-ada" in browser.find_element(By.TAG_NAME, "h1").text)
        events = browser.find_elements(By.CSS_SELECTOR, "li.event")
        types = [e.get_attribute("data-type") for e in events]
        assert types[0] == "StartAccepted" and "ActivityCompleted" in types and types[-1] == "WorkflowCompleted"
        completed = events[types.index("ActivityCompleted")].text
        assert '"greeting": "hello Ada"' in completed and '"letters": 3' in completed
        assert "completed" in browser.find_element(By.CSS_SELECTOR, "dl.kv").text
        _screenshot(browser, "devserver-ui-run.png")
        # The status filter and the search box narrow the list.
        browser.get(server.url + "/ui/workflows?status=failed")
        assert "No workflows match." in browser.page_source
        browser.get(server.url + "/ui/workflows?q=ADA")
        assert browser.find_elements(By.LINK_TEXT, "greet-ada")
        browser.get(server.url + "/ui/workers")
        assert queue in browser.find_element(By.CSS_SELECTOR, "table.workers").text
        browser.get(server.url + "/ui/task-queues")
        assert queue in browser.page_source


def test_a_signal_sent_from_the_ui_releases_a_waiting_run(browser: Any) -> None:
    queue = f"{QUEUE_PREFIX}-{uuid.uuid4().hex[:8]}"
    with _ui_server() as server:
        client = Client(server.url)
        with RunningWorker(_worker(server, queue)):
            client.start_workflow("ui.approval", "new laptop", task_queue=queue, workflow_id="approve-me")
            wait_for(lambda: _history_len(server, "approve-me") >= 3, timeout=20)
            browser.get(server.url + "/ui/workflows/approve-me")
            # The wait's one-hour timeout is a pending timer, shown as a date with the time left.
            timers = _until(browser, lambda: browser.find_elements(By.XPATH, "//h2[.='Pending timers']"
                                                                   "/following-sibling::table[1]")[0].text)
            assert "Fires at (UTC)" in timers, timers
            assert re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z \(in (59 min \d+ s|1 h)\)", timers), timers
            browser.find_element(By.CSS_SELECTOR, "#signal-form input[name=name]").send_keys("approve")
            area = browser.find_element(By.CSS_SELECTOR, "#signal-form textarea[name=arguments]")
            area.clear()
            area.send_keys('["grace"]')
            browser.find_element(By.CSS_SELECTOR, "#signal-form button").click()
            question = _until(browser, lambda: browser.find_element(By.CSS_SELECTOR, ".confirm-question").text)
            assert "approve" in question and "grace" in question
            assert client.describe_workflow("approve-me").status != "completed"  # nothing happened before confirming
            browser.find_element(By.ID, "confirm").click()
            flash = _until(browser, lambda: browser.find_element(By.CSS_SELECTOR, ".flash").text)
            assert "Signal 'approve' sent" in flash
            wait_for(lambda: client.describe_workflow("approve-me").status == "completed", timeout=20)
            assert client.get_result("approve-me") == {"approved_by": "grace", "note": "new laptop"}
            # The open page refreshes itself and shows the run completed without a reload.
            _until(browser, lambda: "WorkflowCompleted" in browser.find_element(By.ID, "live").text, timeout=20)


def test_cancel_from_the_ui_and_bad_signal_arguments_are_refused(browser: Any) -> None:
    queue = f"{QUEUE_PREFIX}-{uuid.uuid4().hex[:8]}"
    with _ui_server() as server:
        client = Client(server.url)
        with RunningWorker(_worker(server, queue)):
            client.start_workflow("ui.approval", "to cancel", task_queue=queue, workflow_id="cancel-me")
            wait_for(lambda: _history_len(server, "cancel-me") >= 3, timeout=20)
            browser.get(server.url + "/ui/workflows/cancel-me")
            browser.find_element(By.CSS_SELECTOR, "#signal-form input[name=name]").send_keys("approve")
            area = browser.find_element(By.CSS_SELECTOR, "#signal-form textarea[name=arguments]")
            area.clear()
            area.send_keys("[not json")
            browser.find_element(By.CSS_SELECTOR, "#signal-form button").click()
            error = _until(browser, lambda: browser.find_element(By.CSS_SELECTOR, ".error").text)
            assert "not valid JSON" in error
            browser.find_element(By.CSS_SELECTOR, "#cancel-form input[name=reason]").send_keys("changed my mind")
            browser.find_element(By.CSS_SELECTOR, "#cancel-form button").click()
            question = _until(browser, lambda: browser.find_element(By.CSS_SELECTOR, ".confirm-question").text)
            assert "changed my mind" in question
            browser.find_element(By.ID, "confirm").click()
            _until(browser, lambda: browser.find_element(By.CSS_SELECTOR, ".flash").text)
            wait_for(lambda: client.describe_workflow("cancel-me").status == "cancelled", timeout=20)


def test_an_unauthenticated_browser_sees_only_the_token_prompt(browser: Any) -> None:
    queue = f"{QUEUE_PREFIX}-{uuid.uuid4().hex[:8]}"
    with _ui_server(token="s3cret-token") as server:
        client = Client(server.url, token="s3cret-token")
        client.start_workflow("ui.greeter", "secret input", task_queue=queue, workflow_id="hidden-run")
        browser.delete_all_cookies()
        for path in ("/ui/workflows", "/ui/workflows/hidden-run", "/ui/workers", "/ui/activities"):
            browser.get(server.url + path)
            assert "/ui/login" in browser.current_url
            assert "hidden-run" not in browser.page_source and "secret input" not in browser.page_source
            assert browser.find_elements(By.ID, "login-form")
        browser.find_element(By.NAME, "token").send_keys("wrong")
        browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
        refusal = _until(browser, lambda: browser.find_element(By.CSS_SELECTOR, ".error").text)
        assert "not this server's token" in refusal
        assert "hidden-run" not in browser.page_source
        browser.find_element(By.NAME, "token").send_keys("s3cret-token")
        browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
        _until(browser, lambda: browser.find_elements(By.LINK_TEXT, "hidden-run"))
        cookie = browser.get_cookie("sw_ui_session")
        assert cookie is not None and cookie["httpOnly"] and "s3cret" not in cookie["value"]
        browser.delete_all_cookies()


def test_an_xss_payload_renders_as_text(browser: Any) -> None:
    queue = f"{QUEUE_PREFIX}-{uuid.uuid4().hex[:8]}"
    attack = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
    with _ui_server() as server:
        client = Client(server.url)
        client.start_workflow("ui.greeter", attack, task_queue=queue, workflow_id="xss-run",
                              memo={"note": "<b>bold?</b>"})
        browser.get(server.url + "/ui/workflows/xss-run")
        _until(browser, lambda: browser.find_element(By.TAG_NAME, "h1"))
        assert browser.execute_script("return window.__xss === undefined")
        assert not browser.find_elements(By.CSS_SELECTOR, "main img")
        assert not browser.find_elements(By.CSS_SELECTOR, "main b")
        page_text = browser.find_element(By.TAG_NAME, "main").text
        assert attack.replace('"', '\\"') in page_text  # the decoded input, shown literally as JSON text
        assert "<b>bold?</b>" in page_text
