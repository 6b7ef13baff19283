"""perflow's built-in pass library.

Each family of passes lives in its own module (``passes.<family>``); importing
this package registers them all with :mod:`perflow.flow.registry`.
"""

from __future__ import annotations

import importlib
import pkgutil

__all__: list[str] = []

for _m in pkgutil.iter_modules(__path__):
    if not _m.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_m.name}")
