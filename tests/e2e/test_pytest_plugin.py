"""The pytest plugin, installed through its ``pytest11`` entry point: a bare test folder (no conftest,
no ``pytest_plugins``) gets ``durable_env`` / ``durable_client``, the pool option and markers.

The inner pytest runs in its own process, as a user's would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

USER_TESTS = '''
import pytest

from sync_worker import workflow
from sync_worker.errors import DurableWorkflowError

SEEN = {}


@workflow.defn(name="plugin.sleepy")
class Sleepy:
    def run(self, ctx):
        yield ctx.sleep(7 * 86400)
        return "rested"


def test_a_week_long_timer(durable_env, durable_client):
    assert durable_env.supports_time_skipping and durable_env.pool == "threads"
    assert durable_client is durable_env.client
    with durable_env.worker(workflows=[Sleepy]):
        handle = durable_client.start_workflow("plugin.sleepy", task_queue=durable_env.task_queue,
                                               execution_timeout_seconds=30 * 86400, run_timeout_seconds=30 * 86400)
        assert handle.result(timeout=30) == "rested"
    assert 7 * 86400 - 60 < durable_env.time_skipped < 7 * 86400 + 60
    SEEN["server"] = durable_env.server


def test_each_test_gets_its_own_environment_torn_down_after_it(durable_env):
    assert SEEN["server"] is not durable_env.server
    with pytest.raises(RuntimeError, match="not started"):
        SEEN["server"].engine
    assert durable_env.time_skipped == 0.0


@pytest.mark.durable_pool("gevent")
def test_the_marker_chooses_the_pool(request):
    with pytest.raises(RuntimeError, match="monkey-patched"):  # this process was not patched for gevent
        request.getfixturevalue("durable_env")


@pytest.mark.durable_env(start_time=946684800.0)
def test_the_environment_marker_passes_options(durable_env):
    assert abs(durable_env.time() - 946684800.0) < 60
'''


def test_a_bare_test_folder_gets_the_fixtures(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    env = {k: v for k, v in os.environ.items() if k not in ("SYNC_WORKER_POOL", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durable-pool",
                             "threads", "test_user.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout


def test_the_plugin_can_be_switched_off(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text("def test_needs_it(durable_env):\n    pass\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:sync_worker",
                             "test_user.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "fixture 'durable_env' not found" in result.stdout
