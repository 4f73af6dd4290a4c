"""Optional imports for the converters, failing with one clear message."""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType


def require(module: str, caller: str, hint: str) -> ModuleType:
    """Import ``module`` or raise ImportError naming the caller and how to install.

    Examples:
        >>> require("math", "example", "it is built in").sqrt(4.0)
        2.0
    """
    try:
        with warnings.catch_warnings():
            # Optional libraries warn about their own dependencies on import (PyG
            # about torch.jit); that noise is theirs, not the caller's.
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{caller} needs {module}: {hint}") from err
