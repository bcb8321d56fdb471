"""Optional dependencies (the pip extras): imported on first use; when missing, an error naming the extra."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, what: str, extra: str, error: type[Exception] = ImportError) -> ModuleType:
    """``module``, imported; else ``error`` saying that ``what`` needs it and which extra installs it."""
    try:
        return importlib.import_module(module)
    except (ImportError, OSError, RuntimeError) as exc:  # OSError/RuntimeError: FFmpeg libraries missing
        package = module.split(".")[0]
        raise error(f"{what} needs {package}: pip install 'shardstream[{extra}]' ({exc})") from exc
