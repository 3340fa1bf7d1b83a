"""``examples/prefork_worker.py`` runs end to end: activities in two child processes, workflow tasks
in a third, none in the parent, and a warm stop with exit 0."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the prefork pool forks (POSIX only)")
def test_prefork_example_runs_reports_in_child_processes() -> None:
    env = {k: v for k, v in os.environ.items() if k != "SYNC_WORKER_POOL"}
    result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "prefork_worker.py")], cwd=REPO,
                            capture_output=True, text=True, timeout=180, env=dict(env, PYTHONPATH=REPO))
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    parent = int(re.search(r"parent pid (\d+)", out).group(1))  # type: ignore[union-attr]
    standalone = ast.literal_eval(re.search(r"ran in processes (\[[^\]]*\])", out).group(1))  # type: ignore[union-attr]
    workflow = re.search(r"activities in (\[[^\]]*\]), workflow tasks in (\d+)", out)
    assert workflow, out
    assert parent not in standalone and 1 <= len(standalone) <= 2
    assert set(ast.literal_eval(workflow.group(1))) <= set(standalone)
    assert int(workflow.group(2)) not in set(standalone) | {parent}
    assert "(exit 0)" in out
