"""Load a module written against the published SDK with only its import line swapped to sync_worker.

This is the compatibility promise made executable: the same source text, unchanged but for
``from durable_workflow import ...`` → ``from sync_worker import ...``, must run on our worker.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Tuple, Union

SDK_IMPORT = "from durable_workflow import activity, workflow"
OUR_IMPORT = "from sync_worker import activity, workflow"


def load_with_sync_worker_imports(sdk_module: Union[types.ModuleType, Tuple[str, Path]], *,
                                  same_name: bool = False) -> types.ModuleType:
    """Exec an SDK-authored module's source, with its one SDK import line replaced, into a fresh module.

    ``sdk_module`` is the imported module, or ``(module name, path)`` of its file, so the
    sync_worker side loads it where the published SDK is not installed. With ``same_name`` the
    code runs under the original module's ``__name__`` (as one module deployed with either
    import would: functions, and so condition fingerprints, carry that name).
    """
    if isinstance(sdk_module, tuple):
        module_name, path = sdk_module
    else:
        module_name, path = sdk_module.__name__, Path(sdk_module.__file__ or "")
    source = path.read_text(encoding="utf-8")
    assert source.count(SDK_IMPORT) == 1, f"{module_name} must hold exactly one line {SDK_IMPORT!r}"
    name = f"{module_name}__sync_worker"
    module = types.ModuleType(module_name if same_name else name)
    module.__file__ = str(path)
    sys.modules[name] = module  # introspection (annotations, fingerprints) resolves the module by name
    try:
        exec(compile(source.replace(SDK_IMPORT, OUR_IMPORT), f"{path} (import swapped)", "exec"),
             module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
