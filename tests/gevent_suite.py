"""Run the end-to-end suite a second time, in a process monkey-patched for gevent first.

Usage: ``python3 tests/gevent_suite.py [pytest args...]`` (``scripts/test`` runs it after the
main suite). The patch comes before any other import, as a real gevent worker process would
do it; the e2e helpers then build every worker with ``pool="gevent"``. Tests marked
``gevent_incompatible`` are deselected; "no tests collected" counts as a failure.
"""

from gevent import monkey

monkey.patch_all()

import os  # noqa: E402
import sys  # noqa: E402

os.environ["SYNC_WORKER_TEST_POOL"] = "gevent"
# This file lives in tests/; make the project root importable (``tests._devserver`` etc.).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.chdir(ROOT)

import pytest  # noqa: E402

PYTEST_NO_TESTS_COLLECTED = 5


def main(argv: "list[str]") -> int:
    # anyio's pytest plugin imports trio, which needs the real select.epoll that gevent removes.
    code = int(pytest.main(["tests/e2e", "-p", "no:anyio", "-m", "not gevent_incompatible", *argv]))
    if code == PYTEST_NO_TESTS_COLLECTED:
        sys.stderr.write("gevent suite: no tests were collected; that is a failure\n")
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
