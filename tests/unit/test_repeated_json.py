"""RepeatedMembers: json.loads, except that a named member repeated byte for byte is decoded once."""

from __future__ import annotations

import json
import random

import pytest

from sync_worker.client.repeated_json import RepeatedMembers

CAPS = {"query_tasks": True, "sticky_execution": {"supported": True, "minimum_protocol_version": "1.18"},
        "supported_workflow_task_commands": ["complete_workflow", "schedule_activity"]}


def _poll(task_id: str, caps: object = CAPS, **extra: object) -> str:
    return json.dumps({"task": {"task_id": task_id, "arguments": {"codec": "avro", "blob": "AA=="}},
                       "protocol_version": "1.20", "server_capabilities": caps, **extra})


def test_equal_to_json_loads_and_the_repeated_member_is_decoded_once() -> None:
    decoder = RepeatedMembers(["server_capabilities"])
    first = decoder.loads(_poll("t-1"))
    second = decoder.loads(_poll("t-2"))
    assert first == json.loads(_poll("t-1"))
    assert second == json.loads(_poll("t-2"))
    assert second["task"]["task_id"] == "t-2"
    assert second["server_capabilities"] is first["server_capabilities"]  # reused, not decoded again
    assert second["task"] is not first["task"]


def test_a_changed_member_is_decoded_afresh() -> None:
    decoder = RepeatedMembers(["server_capabilities"])
    first = decoder.loads(_poll("t-1"))
    changed = dict(CAPS, query_tasks=False)
    second = decoder.loads(_poll("t-2", changed))
    assert second["server_capabilities"] == changed
    assert second["server_capabilities"] is not first["server_capabilities"]
    # a member that only starts like the remembered one, then goes on, is not taken for it
    longer = json.dumps(changed)[:-1] + ', "extra": 1}'
    text = _poll("t-3").replace(json.dumps(CAPS), longer)
    assert decoder.loads(text) == json.loads(text)


def test_only_named_top_level_members_are_remembered() -> None:
    decoder = RepeatedMembers(["server_capabilities"])
    nested = json.dumps({"task": {"server_capabilities": CAPS}, "server_capabilities": {"a": 1}})
    once = decoder.loads(nested)
    again = decoder.loads(nested)
    assert again == json.loads(nested)
    assert again["task"]["server_capabilities"] is not once["task"]["server_capabilities"]
    assert again["server_capabilities"] is once["server_capabilities"]


@pytest.mark.parametrize("text", [
    "", " ", "{", "{}", " { } ", "[]", "null", "1", '"x"', '{"a":1,}', '{"a" 1}', '{"a":1 "b":2}',
    '{"a":1}x', '{"a":1} ', '{"a":1}{"b":2}', '{"a":NaN,"b":-Infinity}', '{"a":1,"a":2}',
    '{"server_capabilities":1}', '{"server_capabilities":"x","task":null}',
    '\n{ "server_capabilities" : { "q" : [1, 2] } ,\t"task" : null }\r\n', '{"a":"\\u00e9\\n"}',
    '{"a":"unterminated}', '{"server_capabilities":{"q":[1,2]}', '{1:2}',
])
def test_every_outcome_is_json_loads_own(text: str) -> None:
    decoder = RepeatedMembers(["server_capabilities"])
    for _ in range(2):  # the second time with the member remembered
        try:
            expected = json.loads(text)
        except ValueError as error:
            with pytest.raises(type(error)) as raised:
                decoder.loads(text)
            assert str(raised.value) == str(error)
        else:
            got = decoder.loads(text)
            assert got == expected or (got != got and expected != expected)
            assert json.dumps(got) == json.dumps(expected)


def test_random_documents_decode_as_json_does() -> None:
    rng = random.Random(29)
    decoder = RepeatedMembers(["server_capabilities", "b"])

    def value(depth: int) -> object:
        kind = rng.randrange(6 if depth < 3 else 4)
        if kind == 0:
            return rng.choice([None, True, False])
        if kind == 1:
            return rng.choice([0, -3, 2.5, 10 ** 20])
        if kind == 2:
            return "".join(rng.choice('ab"\\\u00e9 {}[],:') for _ in range(rng.randrange(6)))
        if kind == 3:
            return rng.choice([CAPS, [1, 2]])
        if kind == 4:
            return [value(depth + 1) for _ in range(rng.randrange(3))]
        return {rng.choice(["server_capabilities", "b", "c"]): value(depth + 1) for _ in range(rng.randrange(3))}

    for _ in range(500):
        doc = {rng.choice(["server_capabilities", "b", "task", "d"]): value(0) for _ in range(rng.randrange(1, 5))}
        text = json.dumps(doc, indent=rng.choice([None, 1]), separators=rng.choice([None, (",", ":")]))
        assert decoder.loads(text) == json.loads(text)


@pytest.mark.parametrize("text", [
    '{"a":1,"b":[1,2,{"c":null}]}', '[1,2]', '{}', '[]', ' {"a":1}', '{"a":1} ', '{"a":1}\n', '{"a":1}{}',
    '{"a":1', '{"a":}', '[1,]', '{"a":NaN}', '{"a":"\\u00e9\\n"}', '"text"', '12', 'null', '', ' ', '{"a":1}x',
    '[', '{', '{"a" : 1 }',
])
def test_the_transports_decode_is_jsons(text: str) -> None:
    """The transport's decode of a response body: ``json``'s value, or ``json``'s error (type,
    message and position)."""
    from sync_worker.client.transport import _decode

    try:
        expected = json.loads(text)
    except json.JSONDecodeError as exc:
        with pytest.raises(json.JSONDecodeError) as caught:
            _decode(text)
        assert (caught.value.msg, caught.value.pos) == (exc.msg, exc.pos)
    else:
        assert _decode(text) == expected
