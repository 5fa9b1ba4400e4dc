"""The project's optional C extensions: each has a pure-Python path, chosen when the module is not built or
``LOGCLEANER_PURE_PYTHON`` is set (how the tests hold the two paths to the same output)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["load_native_module"]


def load_native_module(name: str) -> ModuleType | None:
    """The extension ``name`` (a dotted module name), or None where the pure-Python path serves."""
    if os.environ.get("LOGCLEANER_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
