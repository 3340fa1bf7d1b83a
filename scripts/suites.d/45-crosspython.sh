#!/usr/bin/env bash
# Runs recorded under one CPython replay under every other one we claim (3.9-3.13): the corpus
# of tests/crosspython/corpus.py is recorded under each interpreter (this one and the venvs of
# scripts/prepare.d/42-core-venvs.sh) and replayed, cut at every event, under every other one.
set -euo pipefail
cd "$(dirname "$0")/../.."
pythons=(python3 ${SYNC_WORKER_CORE_PYTHONS:-})
if [ ${#pythons[@]} -lt 5 ]; then
  echo "crosspython leg: only ${#pythons[@]} of the 5 claimed Pythons are available (scripts/prepare.d/42-core-venvs.sh)" >&2
  [ -n "${CI:-}" ] && exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in "${!pythons[@]}"; do
  PYTHONPATH="$PWD" "${pythons[$i]}" tests/crosspython/corpus.py record "$work/corpus-$i.json"
done
status=0
for i in "${!pythons[@]}"; do
  for j in "${!pythons[@]}"; do
    [ "$i" = "$j" ] && continue
    PYTHONPATH="$PWD" "${pythons[$j]}" tests/crosspython/corpus.py check "$work/corpus-$i.json" 2>"$work/err" || {
      status=1; cat "$work/err" >&2; }
  done
done
exit $status
