"""Why tests that need the published SDK do not apply where it is not installed."""

from __future__ import annotations

SDK_MISSING = ("the published SDK durable-workflow 2.12 is not installed (it needs Python 3.10+; "
               "pip install -e '.[dev]' installs it there)")
