#!/usr/bin/env bash
# The Celery facade's in-process suites (tasks, canvas, signals, eager, beat) again in a process
# monkey-patched for gevent first: workers on greenlets, time limits as gevent.Timeout (~1 minute).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD:$PWD/integrations/celery${PYTHONPATH:+:$PYTHONPATH}"
python3 tests/integrations/celery/gevent_suite.py -q -p no:cacheprovider "$@"
