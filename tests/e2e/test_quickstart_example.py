"""The README's first command runs this example; keep it working."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quickstart.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("quickstart_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quickstart_runs_end_to_end_on_the_given_server(dev_server: Any, capsys: Any) -> None:
    result = _load().main(["--server-url", dev_server.url])
    assert result["invoice"] == {"to": "ada@example.com", "total_cents": 2000, "lines": 2}
    assert result["receipt"] == "sent invoice of 20.00 to ada@example.com"
    out = capsys.readouterr().out
    assert "WorkflowCompleted" in out and out.count("ActivityCompleted") == 3
