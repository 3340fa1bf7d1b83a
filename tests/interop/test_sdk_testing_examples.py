"""The published SDK's testing examples run on sync_worker.testing by swapping their imports.

``_sdk_testing_examples.py`` is written against ``durable_workflow.testing`` (the scenarios of the
SDK's docs and harness tests). Each ``example_*`` runs on the published SDK as written (where it
is installed: it needs Python 3.10+) and on sync_worker with only its ``from durable_workflow...``
import lines rewritten — the same source text otherwise.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
import types
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

SOURCE = Path(__file__).with_name("_sdk_testing_examples.py")
SDK_INSTALLED = importlib.util.find_spec("durable_workflow") is not None


def swap_imports(source: str) -> str:
    """Only the ``durable_workflow`` import lines change: the package name, and its serializer module."""
    lines: List[str] = []
    changed = 0
    for line in source.splitlines(keepends=True):
        if line.startswith("from durable_workflow"):
            line = line.replace("durable_workflow", "sync_worker").replace("import serializer,",
                                                                          "import payloads as serializer,")
            changed += 1
        lines.append(line)
    assert changed == 4, "the examples hold exactly four durable_workflow import lines"
    return "".join(lines)


def _load(flavour: str) -> types.ModuleType:
    name = f"tests.interop._sdk_testing_examples__{flavour}"
    source = SOURCE.read_text(encoding="utf-8")
    if flavour == "sync_worker":
        source = swap_imports(source)
    module = types.ModuleType(name)
    module.__file__ = str(SOURCE)
    sys.modules[name] = module
    exec(compile(source, f"{SOURCE} ({flavour})", "exec"), module.__dict__)
    return module


FLAVOURS = ["sync_worker"] + (["durable_workflow"] if SDK_INSTALLED else [])
_modules: Dict[str, types.ModuleType] = {}


@pytest.fixture(scope="module", params=FLAVOURS)
def examples(request: pytest.FixtureRequest) -> Iterator[types.ModuleType]:
    flavour = request.param
    if flavour not in _modules:
        _modules[flavour] = _load(flavour)
    yield _modules[flavour]


def _names() -> List[str]:
    """The examples' names, read without importing either package (the SDK may be absent)."""
    tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
    return sorted(node.name for node in tree.body
                  if isinstance(node, ast.FunctionDef) and node.name.startswith("example_"))


@pytest.mark.parametrize("name", _names())
def test_example(examples: types.ModuleType, name: str, tmp_path: Path) -> None:
    fn = getattr(examples, name)
    kwargs = {"tmp_path": tmp_path} if "tmp_path" in inspect.signature(fn).parameters else {}
    fn(**kwargs)


def test_every_example_is_collected() -> None:
    assert len(_names()) >= 40


def test_the_swap_touches_only_import_lines() -> None:
    original = SOURCE.read_text(encoding="utf-8").splitlines()
    swapped = swap_imports(SOURCE.read_text(encoding="utf-8")).splitlines()
    differing = [(a, b) for a, b in zip(original, swapped) if a != b]
    assert len(original) == len(swapped)
    assert len(differing) == 4 and all(a.startswith("from durable_workflow") for a, _ in differing)
