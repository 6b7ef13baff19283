"""Finding and reading flows: files (YAML or Python), shipped flows by name, ``flow:`` references.

Trust model: YAML is read with a safe loader and never runs code. Code is
imported only when the user allows it (``allow_import=True``, ``--allow-import``):
dotted pass paths ``module:function`` and ``flow: file.py`` references
inside a flow. A Python flow file the user names directly (``perflow run
my_flow.py``) is code the user chose to run and is imported. Shipped flows
are part of perflow.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import FlowError
from . import yaml_io  # the module: yaml_io, loader and flow import each other (see flow.py's last lines)
from .flow import Flow
from .library import find_flow, flow_names
from .problems import did_you_mean

__all__ = ["load_flow", "resolve_flow_ref", "flow_from_python"]

_CACHE: dict[tuple[str, int], Flow] = {}


def flow_from_python(obj: Any, where: str) -> Flow:
    """The flow a Python module defines: a ``FLOW`` attribute or a ``flow()`` function."""
    f = getattr(obj, "FLOW", None)
    if f is None and callable(getattr(obj, "flow", None)):
        f = obj.flow()
    if not isinstance(f, Flow):
        raise FlowError(f"{where} defines no flow (expected a FLOW variable or a flow() function returning a Flow)")
    if not f.description and getattr(obj, "__doc__", None):
        f.description = obj.__doc__.strip()
    return f


def _import_file(path: Path) -> Flow:
    name = f"perflow_user_flow_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FlowError(f"{path}: cannot import this Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception:
        sys.modules.pop(name, None)
        raise
    return flow_from_python(mod, str(path))


def _read_file(path: Path, *, allow_import: bool, validate: bool) -> Flow:

    if path.suffix == ".py":
        f = _import_file(path)
        f.source = str(path)
        if validate:
            f.validate(allow_import=allow_import)
        return f

    with open(path, "rb") as fh:
        data = fh.read(yaml_io.MAX_FLOW_BYTES + 1)  # never more: the parser refuses longer flows anyway
    if len(data) > yaml_io.MAX_FLOW_BYTES:
        raise FlowError(f"{path}: the flow file is larger than the {yaml_io.MAX_FLOW_BYTES:,} bytes allowed")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FlowError(f"{path}: not a text file ({exc})") from None
    f = yaml_io.loads(text, source=str(path), validate=False)
    if validate:
        f.validate(allow_import=allow_import)
    return f


def load_flow(flow: str | os.PathLike[str] | Flow, *, allow_import: bool = False, validate: bool = True) -> Flow:
    """Read a flow from a YAML or Python file, or find a shipped flow by name.

    Parameters
    ----------
    flow : str, path or Flow
        A file (``.yaml``/``.yml``, or ``.py`` defining ``FLOW`` or
        ``flow()``), or the name of a shipped flow (see ``perflow flows``).
        A :class:`Flow` is returned as is (validated).
    allow_import : bool
        Allow the flow to import code: dotted pass paths and ``flow:``
        references to Python files.
    validate : bool
        Check the flow and raise :class:`~perflow.errors.ValidationError`
        listing every problem.

    Raises
    ------
    FileNotFoundError
        Neither a file nor a shipped flow of that name exists.
    ValidationError
        The flow is invalid (every problem, with YAML path, line and column).
    """
    if isinstance(flow, Flow):
        return flow.validate(allow_import=allow_import) if validate else flow
    p = Path(flow)
    if p.is_file():
        f = _read_file(p, allow_import=allow_import, validate=validate)
        return f

    name = str(flow)
    if name in flow_names():
        f = find_flow(name)
        if validate:
            f.validate(allow_import=allow_import)
        return f

    hint = did_you_mean(name, flow_names())
    raise FileNotFoundError(f"{name}: no such flow file, and no shipped flow of that name{hint} (see `perflow flows`)")


def resolve_flow_ref(text: str, base_dir: str, *, allow_import: bool = False) -> Flow:
    """The flow a ``flow:`` key names: a shipped flow, or a file relative to ``base_dir``.

    The sub-flow is read but not validated (validation of the including flow
    checks it). Python files need ``allow_import``.
    """
    p = Path(text)
    if not p.is_absolute():
        p = Path(base_dir) / p
    looks_like_path = "/" in text or os.sep in text or p.suffix in (".yaml", ".yml", ".py")
    if looks_like_path or p.is_file():
        if not p.is_file():
            raise FileNotFoundError(f"flow file {text!r} not found (looked for {p})")
        if p.suffix == ".py" and not allow_import:
            raise FlowError(
                f"flow {text!r} is Python code; allow importing code (allow_import=True or --allow-import) if you trust it"
            )
        key = (str(p.resolve()), p.stat().st_mtime_ns)
        if key not in _CACHE:
            f = _read_file(p, allow_import=allow_import, validate=False)
            f.origin = text
            _CACHE[key] = f
        return _CACHE[key]

    if text in flow_names():
        f = find_flow(text)
        f.origin = text
        return f

    raise FileNotFoundError(f"unknown flow {text!r}{did_you_mean(text, flow_names())}: not a shipped flow nor a file")
