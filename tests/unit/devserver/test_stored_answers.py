"""History answers splice the events' stored JSON text in: the bytes must be those of decoding and encoding.

The store writes events ASCII-only (``ensure_ascii=True``); answers are UTF-8 (``ensure_ascii=False``).
``StoredList`` passes a stored text through only when the two encodings agree; each check here
compares the spliced answer with the answer built from the decoded events (what the dev server sent
before), over every event of the conformance fixtures and over odd ones.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from sync_worker.devserver import DevServer
from sync_worker.devserver.encoding import PreEncoded, StoredList, _dumps, encode_body
from sync_worker.devserver.store import Store
from sync_worker.payloads import envelope
from tests._fixtures import FIXTURES_DIR, fixtures_dir
from tests.unit.devserver._raw import Raw


def _plain(body: Any) -> bytes:
    """The answer as the dev server encoded it before: every event decoded, then encoded."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _stored(events: List[Dict[str, Any]]) -> Store:
    store = Store(":memory:")
    store.begin()
    for seq, event in enumerate(events, 1):
        store.add_event("run-1", seq, event)
    store.end(True)
    return store


def _walk(value: Any) -> Iterator[Dict[str, Any]]:
    if isinstance(value, dict):
        if isinstance(value.get("event_type"), str) or (isinstance(value.get("type"), str) and "payload" in value):
            yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def _fixture_events() -> List[Dict[str, Any]]:
    events: List[Dict[str, Any]] = []
    for path in sorted(Path(FIXTURES_DIR).rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue
        events.extend(_walk(data))
    return events


_ODD: List[Dict[str, Any]] = [
    {"event_type": "WorkflowStarted", "payload": {"workflow_id": "wf-é", "arguments": "日本語", "emoji": "🙂",
                                                  "key-ü": {"nested-ß": ["ø", "ascii"]}}},
    {"event_type": "SignalReceived", "payload": {"name": "\\u0041 is not an escape", "path": "C:\\users\\u",
                                                 "quote": "a \"quoted\" word", "slash": "a/b", "tail": "\\"}},
    {"event_type": "ActivityCompleted", "payload": {"big": 10 ** 40, "negative": -(10 ** 30), "float": 0.1,
                                                    "tiny": 5e-324, "huge": 1.7976931348623157e308,
                                                    "zero": -0.0, "whole": 3.0, "exp": 1e22, "int": 0}},
    {"event_type": "Controls", "payload": {"nl": "a\nb\tc\rd\be\ff", "nul": "x\x00y", "bell": "\x07",
                                           "del": "\x7f", "c1": "\x85", "sep": "\u2028\u2029", "bom": "\ufeff"}},
    {"event_type": "NotNumbers", "payload": {"nan": math.nan, "inf": math.inf, "minus": -math.inf}},
    {"event_type": "Envelope", "payload": {"result": {"codec": "avro", "blob": "AAECAwQF+/9=="},
                                           "payload_codec": "avro", "empty": {}, "list": [], "none": None,
                                           "flags": [True, False, None]}},
    {"event_type": "Mark", "payload": {"text": "\x00sync-worker-stored-json\x00"}},
    {"event_type": "Keys", "payload": {"": "", " ": " ", "\u00e9": "\u00e9", "a\\u": "\\u"}},
]


def _pages(events: List[Dict[str, Any]]) -> Iterator[List[Dict[str, Any]]]:
    for start in range(0, len(events), 7):
        yield events[start:start + 7]


def _check(store: Store, count: int) -> None:
    decoded = store.events("run-1")
    spliced = StoredList(store.event_texts("run-1"))
    assert len(spliced) == count and list(spliced) == decoded
    caps = {"a": "é", "b": [1, 2.5]}
    for body, plain in (
        ({"events": spliced}, {"events": decoded}),
        ({"task": {"history_events": spliced[:3], "more": spliced[3:]}, "server_capabilities": PreEncoded(caps)},
         {"task": {"history_events": decoded[:3], "more": decoded[3:]}, "server_capabilities": caps}),
        ([spliced, spliced[1:2], {"x": spliced[:0]}], [decoded, decoded[1:2], {"x": []}]),
    ):
        assert encode_body(body) == _plain(plain), body


def test_every_fixture_event_answers_the_same_bytes() -> None:
    fixtures_dir()
    events = _fixture_events()
    assert len(events) > 100  # the fixtures hold hundreds of events; walking them must find them
    for page in _pages(events):
        _check(_stored(page), len(page))


@pytest.mark.parametrize("index", range(len(_ODD)))
def test_odd_events_answer_the_same_bytes(index: int) -> None:
    event = _ODD[index]
    _check(_stored([event, {"event_type": "Plain", "payload": {"n": 1}}, event, event]), 4)


def test_all_odd_events_in_one_page() -> None:
    _check(_stored(_ODD), len(_ODD))


def test_pass_through_only_when_the_encodings_agree() -> None:
    """Characters written the same in both encodings pass; the escaped ones are encoded again."""
    ascii_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode
    for code in [*range(0x300), 0x2028, 0xFEFF, 0x1F642]:
        event = {"event_type": "C", "payload": {chr(code): f"a{chr(code)}\\{chr(code)}u"}}
        text = ascii_encode(event)
        assert StoredList([text]).json() == _dumps([event]), hex(code)
        assert StoredList([text]).json() == _plain([event]).decode("utf-8"), hex(code)


def test_a_lone_surrogate_fails_as_before() -> None:
    store = _stored([{"event_type": "S", "payload": {"half": "\ud800"}}])
    with pytest.raises(UnicodeEncodeError):
        encode_body({"events": store.events("run-1")})
    with pytest.raises(UnicodeEncodeError):
        encode_body({"events": StoredList(store.event_texts("run-1"))})


def test_a_body_holding_the_mark_is_encoded_the_plain_way() -> None:
    store = _stored([{"event_type": "P", "payload": {"n": 1}}])
    spliced, decoded = StoredList(store.event_texts("run-1")), store.events("run-1")
    mark = "\x00sync-worker-stored-json\x00"
    for body, plain in (({"events": spliced, "note": mark}, {"events": decoded, "note": mark}),
                        ({mark: spliced}, {mark: decoded}), ([mark, spliced, mark], [mark, decoded, mark])):
        assert encode_body(body) == _plain(plain)


def test_other_types_are_still_refused() -> None:
    with pytest.raises(TypeError):
        encode_body({"events": StoredList([]), "bad": object()})
    with pytest.raises(TypeError):
        encode_body({"bad": {1, 2}})


def test_stored_list_reads_as_the_decoded_events() -> None:
    events = [{"event_type": "A", "sequence": 1}, {"event_type": "B", "sequence": 2, "payload": {"x": "é"}}]
    stored = StoredList(_stored(events).event_texts("run-1"))
    assert len(stored) == 2 and bool(stored) and not StoredList([])
    assert stored[0] == events[0] and stored[-1] == events[1] and list(stored) == events
    assert stored[1:] == [events[1]] and isinstance(stored[1:], StoredList) and stored == events
    assert stored != [events[0]] and stored != "text"
    with pytest.raises(IndexError):
        stored[2]


def test_threads_encoding_at_once_each_get_their_own_events() -> None:
    stores = [_stored([{"event_type": f"E{n}", "payload": {"n": n, "s": "x" * n}}] * (n + 1)) for n in range(6)]
    expected = [_plain({"events": s.events("run-1"), "n": n}) for n, s in enumerate(stores)]
    wrong: List[int] = []

    def encode(n: int) -> None:
        body = {"events": StoredList(stores[n].event_texts("run-1")), "n": n}
        for _ in range(3000):
            if encode_body(body) != expected[n]:
                wrong.append(n)

    threads = [threading.Thread(target=encode, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_answers_over_http_are_the_plain_encoding() -> None:
    """A workflow with unicode and escapes in its history: each history-bearing answer's bytes are
    exactly the compact UTF-8 encoding of what they decode to (the answer the server wrote before)."""
    with DevServer(port=0) as server:
        raw = Raw(server.url)
        started = raw.ok("POST", "/workflows", {"workflow_id": "wf-u", "workflow_type": "t", "task_queue": "q",
                                                "input": envelope(["é", "\\u0041"]),
                                                "memo": {"note": "é 日本 \\u0041", "n": 2 ** 63 - 1, "f": 0.1}})
        run_id = started["run_id"]
        signal = raw.call("POST", "/workflows/wf-u/signal/sig", {"input": envelope(["日本", "\\u"])})
        assert signal.status_code == 202, signal.text
        poll = raw.call("POST", "/worker/workflow-tasks/poll", {"worker_id": "w1", "task_queue": "q",
                                                                "timeout_seconds": 2}, plane="worker")
        task = poll.json()["task"]
        started_event = next(e for e in task["history_events"] if e["event_type"] == "WorkflowStarted")
        assert started_event["payload"]["memo"]["note"] == "é 日本 \\u0041"
        assert poll.content == _plain(poll.json())
        page = raw.call("POST", f"/worker/workflow-tasks/{task['task_id']}/history",
                        {"lease_owner": "w1", "workflow_task_attempt": task["workflow_task_attempt"],
                         "next_history_page_token": None, "history_page_size": 1}, plane="worker")
        assert page.status_code == 200 and len(page.json()["history_events"]) == 1
        assert page.content == _plain(page.json())
        history = raw.call("GET", f"/workflows/wf-u/runs/{run_id}/history?wait_new_event=1")
        events = history.json()["events"]
        assert [e["event_type"] for e in events] == ["StartAccepted", "WorkflowStarted", "SignalReceived"]
        assert history.content == _plain(history.json())
        assert events == [json.loads(t) for t in server.engine.store.event_texts(run_id)]


def test_a_history_read_of_a_remembered_run_decodes_no_run_and_still_checks_its_workflow() -> None:
    with DevServer(port=0) as server:
        raw = Raw(server.url)
        run_id = raw.start("wf-a")["run_id"]
        raw.start("wf-b")
        engine = server.engine
        original, decoded = engine.get_run, []
        engine.get_run = lambda rid: decoded.append(rid) or original(rid)  # type: ignore[method-assign]
        page = raw.ok("GET", f"/workflows/wf-a/runs/{run_id}/history")
        assert page["run_id"] == run_id and [e["event_type"] for e in page["events"]][:2] == [
            "StartAccepted", "WorkflowStarted"]
        assert decoded == []  # the remembered columns said whose run it is
        for path in (f"/workflows/wf-b/runs/{run_id}/history", "/workflows/wf-a/runs/run-unknown/history"):
            missing = raw.call("GET", path)
            assert missing.status_code == 404 and missing.json()["reason"] == "workflow_not_found"
        assert raw.ok("GET", "/workflows/wf-a/history")["run_id"] == run_id  # no run id: the current run
