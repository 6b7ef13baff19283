"""Validate an OTF2 archive with other tools' readers: ``otf2-print`` and the ``otf2`` Python bindings.

:func:`check_otf2` fails (AssertionError naming the archive and the first
offending line) when ``otf2-print`` exits non-zero, prints ``INVALID`` or an
error, or when the bindings cannot read every definition and event.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["check_otf2", "otf2_print"]


def otf2_print(anchor: str | Path, *args: str) -> str:
    """The output of ``otf2-print ARGS ANCHOR`` (skips the test when the tool is missing)."""
    exe = shutil.which("otf2-print")
    if exe is None:
        pytest.skip("otf2-print is not installed (Debian package otf2-tools)")
    p = subprocess.run([exe, *args, str(anchor)], capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"otf2-print {' '.join(args)} {anchor} failed ({p.returncode}):\n{out[-2000:]}"
    assert not p.stderr.strip(), f"otf2-print {' '.join(args)} {anchor} complained:\n{p.stderr[-2000:]}"
    return out


def _bad_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "INVALID" in ln]


def check_otf2(anchor: str | Path, *, need_print: bool = True) -> dict[str, int]:
    """Check an archive with otf2-print (events and definitions) and the otf2 bindings.

    Parameters
    ----------
    anchor : path
    need_print : bool
        Skip the test when otf2-print is missing (else check with the bindings only).

    Returns
    -------
    dict
        Event record name -> count, as the bindings read them.
    """
    anchor = Path(anchor)
    if need_print or shutil.which("otf2-print"):
        for args in ((), ("-G",)):
            bad = _bad_lines(otf2_print(anchor, *args))
            assert not bad, f"otf2-print {' '.join(args)} {anchor}: {bad[0]}"
    import otf2

    counts: dict[str, int] = {}
    with otf2.reader.open(str(anchor)) as trace:
        defs = trace.definitions
        for table in ("regions", "locations", "comms", "calling_contexts", "interrupt_generators", "system_tree_nodes"):
            for d in getattr(defs, table):
                str(d)
        for _location, event in trace.events:
            name = type(event).__name__
            counts[name] = counts.get(name, 0) + 1
            if hasattr(event, "collective_op"):
                assert event.collective_op is not None
    return counts
