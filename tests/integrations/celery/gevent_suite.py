"""The Celery facade's in-process suites again, in a process monkey-patched for gevent first.

Usage: ``python3 tests/integrations/celery/gevent_suite.py [pytest args]`` (the
``scripts/suites.d/60-celery-gevent.sh`` leg). Workers run on greenlets
(``SYNC_WORKER_TEST_POOL=gevent``): soft and hard time limits are ``gevent.Timeout``s raised in
the task's greenlet, ``revoke(terminate=True)`` throws into it, retries, progress and canvases
run the same way.
"""

from gevent import monkey

monkey.patch_all()

import os  # noqa: E402
import sys  # noqa: E402

os.environ["SYNC_WORKER_TEST_POOL"] = "gevent"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
for path in (ROOT, os.path.join(ROOT, "integrations", "celery")):
    if path not in sys.path:
        sys.path.insert(0, path)
os.chdir(ROOT)

import pytest  # noqa: E402

SUITES = ["tests/integrations/celery/test_tasks_live.py", "tests/integrations/celery/test_canvas_signals_eager.py",
          "tests/integrations/celery/test_beat.py", "tests/integrations/celery/test_sentry_facade.py",
          "tests/integrations/celery/test_request_and_trace.py", "tests/integrations/celery/test_result_graph.py",
          "tests/integrations/celery/test_stamping.py", "tests/integrations/celery/test_task_watch.py",
          "tests/integrations/celery/test_task_alarms.py", "tests/integrations/celery/test_trace_log_records.py",
          "tests/integrations/celery/test_trace_request_copy.py"]


def main(argv: "list[str]") -> int:
    return int(pytest.main([*SUITES, "-p", "no:anyio", *argv]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
