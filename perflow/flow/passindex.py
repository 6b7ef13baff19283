"""The pass index: what the registry knows about a pass library without importing it.

A pass library (an entry point of the group ``perflow.passes``) may be a
module that provides ``pass_index()``, returning ``{pass name: record}``
(records as made by :func:`record_of`), and ``load_all()``. The registry then
lists its passes (names, signatures, settings, documentation, versions, tags)
from the index and imports the module that defines a pass only when the pass
is used. perflow's own library keeps its index in ``perflow/passes/_index.json``,
written by this module and checked by the test suite::

    python -m perflow.flow.passindex            # is the index current? (exit status 1 when not)
    python -m perflow.flow.passindex --write    # rewrite it after changing a pass
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .plugins import entry_points
from .registry import _REGISTRY
from .types import type_label

__all__ = ["PassInfo", "info_of", "record_of", "from_record", "render", "builtin_index_path", "main"]


@dataclass(frozen=True)
class PassInfo:
    """A pass as listings see it; no import of the module that defines it needed.

    ``inputs`` holds ``(name, type label, required, default repr or None)``,
    ``outputs`` ``(name, type label)`` and ``settings`` ``(name, type label,
    default repr or None when required, documentation)``.
    """

    name: str
    module: str
    function: str
    version: str = "1"
    tags: tuple[str, ...] = ()
    cacheable: bool = True
    doc: str = ""
    inputs: tuple[tuple[str, str, bool, str | None], ...] = ()
    outputs: tuple[tuple[str, str], ...] = ()
    settings: tuple[tuple[str, str, str | None, str], ...] = ()
    role: str | None = None  # the role it fills (perflow.flow.roles)

    @property
    def summary(self) -> str:
        """First line of the documentation."""
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""


def info_of(spec: Any) -> PassInfo:
    """The :class:`PassInfo` of a registered :class:`~perflow.flow.spec.PassSpec`."""

    return PassInfo(
        name=spec.name,
        module=spec.module,
        function=spec.func.__qualname__,
        version=spec.version,
        tags=tuple(spec.tags),
        cacheable=spec.cacheable,
        doc=spec.doc,
        inputs=tuple(
            (p.name, type_label(p.type), p.required, None if p.required else repr(p.default)) for p in spec.inputs
        ),
        outputs=tuple((p.name, type_label(p.type)) for p in spec.outputs),
        settings=tuple(
            (s.name, type_label(s.type), None if s.default is inspect.Parameter.empty else repr(s.default), s.doc)
            for s in spec.settings
        ),
        role=spec.role,
    )


def record_of(info: PassInfo) -> dict[str, Any]:
    """A JSON-able record of ``info`` (the index's format; ``role`` only for a pass that fills one)."""
    rec: dict[str, Any] = {
        "module": info.module,
        "function": info.function,
        "version": info.version,
        "tags": list(info.tags),
        "cacheable": info.cacheable,
        "doc": info.doc,
        "inputs": [list(p) for p in info.inputs],
        "outputs": [list(p) for p in info.outputs],
        "settings": [list(s) for s in info.settings],
    }
    if info.role is not None:
        rec["role"] = info.role
    return rec


def from_record(name: str, rec: Mapping[str, Any]) -> PassInfo:
    """The :class:`PassInfo` of an index record."""
    return PassInfo(
        name=name,
        module=str(rec["module"]),
        function=str(rec.get("function", name)),
        version=str(rec.get("version", "1")),
        tags=tuple(rec.get("tags", ())),
        cacheable=bool(rec.get("cacheable", True)),
        doc=str(rec.get("doc", "")),
        inputs=tuple(tuple(p) for p in rec.get("inputs", ())),  # type: ignore[misc]
        outputs=tuple(tuple(p) for p in rec.get("outputs", ())),  # type: ignore[misc]
        settings=tuple(tuple(s) for s in rec.get("settings", ())),  # type: ignore[misc]
        role=rec.get("role"),
    )


def render(specs: Mapping[str, Any]) -> str:
    """The index file's text for the given specs (by name), stable across runs."""
    lines = [
        f"{json.dumps(name)}: {json.dumps(record_of(info_of(specs[name])), sort_keys=True, ensure_ascii=False)}"
        for name in sorted(specs)
    ]
    return "{\n" + ",\n".join(lines) + "\n}\n"  # one pass a line


def library(name: str = "builtin") -> Any:
    """A pass library by its entry-point name in ``perflow.passes`` (perflow's own is ``builtin``)."""

    for ep in entry_points("perflow.passes"):
        if ep.name == name:
            return ep.load()
    raise LookupError(f"no pass library {name!r} in the entry-point group perflow.passes")


def builtin_index_path(name: str = "builtin") -> Path:
    """Where a pass library's index lives: ``_index.json`` beside the library's module."""
    return Path(library(name).__file__).resolve().parent / "_index.json"


def builtin_text(name: str = "builtin") -> str:
    """The index of a library's passes as it should read now (imports every pass module of it)."""

    lib = library(name)
    lib.load_all()
    prefix = lib.__name__
    return render({n: s for n, s in _REGISTRY.items() if s.module == prefix or s.module.startswith(prefix + ".")})


def main(argv: list[str] | None = None) -> int:
    """Check (default) or rewrite perflow's pass index."""
    ap = argparse.ArgumentParser(prog="python -m perflow.flow.passindex", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite perflow/passes/_index.json")
    args = ap.parse_args(argv)
    path = builtin_index_path()
    text = builtin_text()
    if args.write:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path} ({len(json.loads(text))} passes)")
        return 0
    current = path.read_text(encoding="utf-8") if path.is_file() else ""
    if current != text:
        print(f"{path} is out of date: run python -m perflow.flow.passindex --write", file=sys.stderr)
        return 1
    print(f"{path} is current ({len(json.loads(text))} passes)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
