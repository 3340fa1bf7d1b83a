"""Load a module written against the published SDK with only its import line swapped to sync_worker.

This is the compatibility promise made executable: the same source text, unchanged but for
``from durable_workflow import ...`` → ``from sync_worker import ...``, must run on our worker.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

SDK_IMPORT = "from durable_workflow import activity, workflow"
OUR_IMPORT = "from sync_worker import activity, workflow"


def load_with_sync_worker_imports(sdk_module: types.ModuleType) -> types.ModuleType:
    """Exec ``sdk_module``'s source, with its one SDK import line replaced, into a fresh module."""
    source = Path(sdk_module.__file__ or "").read_text(encoding="utf-8")
    assert source.count(SDK_IMPORT) == 1, f"{sdk_module.__name__} must hold exactly one line {SDK_IMPORT!r}"
    name = f"{sdk_module.__name__}__sync_worker"
    module = types.ModuleType(name)
    module.__file__ = sdk_module.__file__
    sys.modules[name] = module  # introspection (annotations, fingerprints) resolves the module by name
    try:
        exec(compile(source.replace(SDK_IMPORT, OUR_IMPORT), f"{sdk_module.__file__} (import swapped)", "exec"),
             module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
