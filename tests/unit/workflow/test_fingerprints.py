"""Condition fingerprints: the published SDK's value, stable where the SDK's is not."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from typing import List

import pytest

from sync_worker.workflow.fingerprints import condition_fingerprint, fingerprint_mismatch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

_PROBE = """
import sys
sys.path.insert(0, {root!r})
from sync_worker.workflow.fingerprints import condition_fingerprint

class Holder:
    def __init__(self):
        self.items = [1]
        self.state = "a"

    def predicates(self):
        return [lambda: any(x for x in self.items), lambda: self.state in {{"a", "b", "c", "d"}},
                lambda: bool(self.items)]

print(" ".join(condition_fingerprint(p) for p in Holder().predicates()))
"""


def _fingerprints_in_a_new_process(seed: str) -> List[str]:
    done = subprocess.run([sys.executable, "-c", _PROBE.format(root=ROOT)], capture_output=True, text=True,
                          check=True, env=dict(os.environ, PYTHONHASHSEED=seed))
    return done.stdout.split()


def test_nested_code_and_frozenset_constants_give_the_same_fingerprint_in_every_process() -> None:
    """The SDK's repr-based value holds a code object's address and a frozenset's hash order."""
    first, second = _fingerprints_in_a_new_process("1"), _fingerprints_in_a_new_process("2")
    assert first == second and len(first) == 3


@pytest.mark.skipif(importlib.util.find_spec("durable_workflow") is None,
                    reason="the published SDK (durable-workflow 2.12, Python 3.10+) is not installed")
def test_a_plain_predicate_has_the_published_sdks_fingerprint() -> None:
    from durable_workflow.workflow import _condition_predicate_fingerprint

    class Holder:
        ready = False

    holder = Holder()

    def predicate() -> bool:
        return holder.ready

    assert condition_fingerprint(predicate) == _condition_predicate_fingerprint(predicate)


def test_a_different_fingerprint_is_reported_not_raised() -> None:
    class Command:
        condition_definition_fingerprint = "sha256:now"

    assert fingerprint_mismatch(None, Command()) is None
    assert fingerprint_mismatch("sha256:now", Command()) is None
    message = fingerprint_mismatch("sha256:then", Command())
    assert message is not None and "another Python version" in message and "sha256:then" in message


