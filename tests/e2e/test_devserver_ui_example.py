"""examples/devserver_ui.py fills a dev server with runs in every state and serves each UI page."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "devserver_ui.py"


def test_the_ui_example_serves_every_page(capsys: Any) -> None:
    spec = importlib.util.spec_from_file_location("devserver_ui_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    url = module.main(["--check"])
    out = capsys.readouterr().out
    assert url.endswith("/ui/") and f"Dev server UI: {url}" in out
    for page in ("workflows", "workflows/order-1", "workflows/approval-1", "activities", "workers", "task-queues"):
        assert f"GET /ui/{page}: 200" in out
