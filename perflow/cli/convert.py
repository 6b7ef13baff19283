"""``perflow convert IN OUT --to FORMAT``: write performance data in another format.

=========  ============================================  =======================================
--to       OUT                                           writer
=========  ============================================  =======================================
chrome     a Chrome/Perfetto trace (``.json``)           :func:`perflow.writers.chrome.to_chrome`
otf2       an OTF2 archive (directory)                   :func:`perflow.writers.otf2.write_otf2`
hatchet    a pickled ``hatchet.GraphFrame``              :func:`perflow.writers.hatchet.to_hatchet`
literal    Hatchet's graph literal (``.json``)           :func:`perflow.writers.hatchet.write_literal`
pag        a saved PAG (directory, fast to read again)   :meth:`perflow.PAG.save` (the convert flow)
cube       a CUBE4 file (``.cubex``) for Cube; a trace   :func:`perflow.writers.cube.write_cube`
           gets Scalasca's trace-analysis metrics
csv        one row per (vertex, process, thread)         :func:`perflow.writers.frames.to_csv`
=========  ============================================  =======================================

OTF2 is written from decoded trace events, so its input must be an OTF2 trace too (a rewrite,
e.g. to change the timer resolution); every other format reads anything ``perflow info`` reads.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

__all__ = ["register", "run", "FORMATS"]

log = logging.getLogger(__name__)

FORMATS = ("chrome", "otf2", "hatchet", "literal", "pag", "csv", "cube")


def register(sub: Any) -> None:
    """Add the ``convert`` subcommand."""
    p = sub.add_parser(
        "convert",
        help="write a trace or profile in another format",
        description="Read IN (any supported format, or a saved PAG) and write it to OUT as FORMAT: "
        + ", ".join(FORMATS)
        + ".",
    )
    p.add_argument("input", metavar="IN", help="file or directory to read")
    p.add_argument("output", metavar="OUT", help="file or directory to write")
    p.add_argument("--to", required=True, choices=FORMATS, metavar="FORMAT", help=" | ".join(FORMATS))
    p.add_argument("--format", help="force the input format instead of detecting it")
    p.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    p.set_defaults(func=run)


def _read(path: str, fmt: str | None) -> Any:
    from ..readers import read

    return read(path, format=fmt)


def run(args: argparse.Namespace) -> int:
    """Read, convert, write; print where the result went."""
    from ..errors import FormatError

    src, out, to = args.input, Path(args.output), args.to
    if not Path(src).exists():
        raise FileNotFoundError(f"{src}: no such file or directory")
    if out.exists() and not args.force:
        raise FormatError(out, "already exists (use --force to overwrite it)")
    if to == "otf2":
        from ..readers.otf2 import detect
        from ..readers.otf2._decode import decode
        from ..writers.otf2 import write_otf2

        if (args.format or "otf2") != "otf2" or not detect(src):
            raise FormatError(
                src,
                "cannot write OTF2 from this input: the OTF2 writer needs decoded trace events, "
                "which only an OTF2 trace gives (try --to chrome)",
            )
        where = write_otf2(decode(src), out)
    else:
        pag = _read(src, args.format)
        if to == "chrome":
            if pag.trace is None:
                raise FormatError(src, "is a profile without a trace; a Chrome trace needs trace events")
            from ..writers.chrome import to_chrome

            where = to_chrome(pag, out)
        elif to == "pag":
            where = pag.save(out, overwrite=True)
        elif to == "cube":
            from ..writers.cube import write_cube

            where = write_cube(pag, out)
        elif to == "csv":
            from ..writers.frames import to_csv

            where = to_csv(pag, out)
        elif to == "literal":
            from ..writers.hatchet import write_literal

            where = write_literal(pag, out)
        else:
            import pickle

            from ..writers.hatchet import to_hatchet

            try:
                gf = to_hatchet(pag)
            except Exception as exc:
                raise FormatError(out, f"cannot write the hatchet format: {exc}") from None
            from .._atomic import write_bytes

            write_bytes(out, pickle.dumps(gf))
            where = out
    print(f"perflow: wrote {where} ({to})")
    return 0
