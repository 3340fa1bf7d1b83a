"""docs/observability.md shows what examples/observability.py prints and draws; keep it true."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "observability.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("observability_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_draws_one_trace_and_prints_one_sentry_event(tmp_path: Path, capsys: Any) -> None:
    page = tmp_path / "trace.html"
    result = _load().main(["--html", str(page)])
    assert result["charged"] == "charged 4200"
    names = [row["name"] for row in result["spans"]]
    assert names[:2] == ["POST /checkout", "StartWorkflow:shop.checkout"]
    assert names.count("RunWorkflow:shop.checkout") == 1 and names.count("RunWorkflow:shop.send_receipt") == 1
    assert names.count("RunActivity:shop.reserve_stock") == 2 and names.count("SELECT stock FOR UPDATE") == 2
    assert names.count("RunActivity:shop.charge_card") == 1
    assert all(row["depth"] >= 1 for row in result["spans"][1:])  # every span hangs under the request
    event = result["event"]
    assert event["tags"]["activity.attempt"] == "2" and event["tags"]["activity.type"] == "shop.charge_card"
    assert event["exception"]["values"][-1]["mechanism"] == {"type": "sync_worker", "handled": False}
    assert "trace " in capsys.readouterr().out and page.read_text().count("<tr>") == len(names)
