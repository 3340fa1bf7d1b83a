#!/usr/bin/env bash
# Azurite (the Azure Storage emulator, npm) for the AzureBlobExternalStorage tests
# (tests/unit/test_external_storage_cloud.py), pinned by tests/interop/azurite/package-lock.json.
# Idempotent; no export line (the tests find tests/interop/azurite/node_modules/.bin/azurite-blob).
set -uo pipefail
cd "$(dirname "$0")/../.."
dir=tests/interop/azurite
if ! command -v npm >/dev/null 2>&1; then
  echo "prepare azurite: npm missing (40-nestjs.sh installs it as root); the Azure driver tests will say so" >&2
  exit 0
fi
if [ ! -x "$dir/node_modules/.bin/azurite-blob" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
  echo "prepare azurite: npm ci in $dir" >&2
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2 || echo "prepare azurite: npm ci failed" >&2
fi
exit 0
