"""examples/worker_session.py runs end to end (its own workers, on the given dev server)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "worker_session.py"


def test_the_session_example_keeps_each_files_steps_on_one_worker(dev_server: Any, capsys: Any) -> None:
    spec = importlib.util.spec_from_file_location("worker_session_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.main(["--server-url", dev_server.url, "--files", "4"])
    assert [r["uploaded"] for r in results] == [f"report-{i}.csv.gz" for i in range(4)]
    assert all(r["summary"] == "3 lines, compressed" for r in results)
    assert "all three steps on" in capsys.readouterr().out
