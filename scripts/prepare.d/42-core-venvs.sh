#!/usr/bin/env bash
# One small virtualenv per other CPython we claim (3.9, 3.10, 3.12, 3.13; pyenv or pythonX.Y on
# PATH) holding only the core's install_requires (setup.cfg), for legs that run the repository's
# code under each interpreter through PYTHONPATH (scripts/suites.d/45-crosspython.sh). Refreshed
# when that list changes (a stamp file holds it).
# Prints: export SYNC_WORKER_CORE_PYTHONS="<python> <python> ..."
set -uo pipefail
cd "$(dirname "$0")/../.."
log() { echo "prepare(core-venvs): $*" >&2; }
reqs=$(python3 - <<'PY'
import configparser
config = configparser.ConfigParser()
config.read("setup.cfg")
print("\n".join(line.strip() for line in config["options"]["install_requires"].splitlines() if line.strip()))
PY
)
here=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
found=()
for minor in 3.9 3.10 3.11 3.12 3.13; do
  [ "$minor" = "$here" ] && continue
  base=""
  for candidate in "$HOME"/.pyenv/versions/"$minor".*/bin/python "python$minor"; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "import sys; assert '%d.%d' % sys.version_info[:2] == '$minor'" 2>/dev/null; then
      base=$candidate
      break
    fi
  done
  if [ -z "$base" ]; then
    log "no Python $minor found: runs will not be checked under it"
    continue
  fi
  venv=/tmp/sync-worker-core-$minor
  if ! [ -x "$venv/bin/python" ] || [ "$(cat "$venv/.sync-worker-reqs" 2>/dev/null)" != "$reqs" ]; then
    rm -rf "$venv"
    log "creating $venv with $base"
    if ! "$base" -m venv "$venv" >&2 || ! echo "$reqs" > "$venv/reqs.txt" \
        || ! "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$venv/reqs.txt" >&2; then
      log "could not prepare $venv"
      continue
    fi
    echo "$reqs" > "$venv/.sync-worker-reqs"
  fi
  found+=("$venv/bin/python")
done
echo "export SYNC_WORKER_CORE_PYTHONS=\"${found[*]}\""
