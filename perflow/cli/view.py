"""``perflow view RUN_OR_DIR``: the HTML page of a run, written and opened in a browser (or served).

RUN_OR_DIR is either a folder written by ``perflow run FLOW --output DIR`` (its ``index.html`` is
opened) or performance data (a trace, a profile, a saved PAG): then the page shows its call tree
(sum/mean/max/min over processes, inclusive and exclusive metrics) and, for a trace, the
interactive timeline, and is written to ``--output`` (default: a new folder in the system's
temporary directory). ``--serve`` serves the folder on 127.0.0.1 instead of opening a file.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["register", "run", "build_page"]

log = logging.getLogger(__name__)


def register(sub: Any) -> None:
    """Add the ``view`` subcommand."""
    p = sub.add_parser(
        "view",
        help="open the HTML page of a run or of performance data",
        description="Write the self-contained HTML page (call tree, timeline, reports, tables, figures) "
        "of RUN_OR_DIR and open it in a browser.",
    )
    p.add_argument("path", metavar="RUN_OR_DIR", help="an output folder of `perflow run`, or data to read")
    p.add_argument("-o", "--output", metavar="DIR", help="where to write index.html (default: a temporary folder)")
    p.add_argument("--format", help="force the input format instead of detecting it")
    p.add_argument("--no-open", action="store_true", help="write the page and print its path only")
    p.add_argument("--serve", action="store_true", help="serve the page on http://127.0.0.1:PORT until interrupted")
    p.add_argument("--port", type=int, default=8000, help="port for --serve (default 8000; 0: any free port)")
    p.set_defaults(func=run)


def build_page(path: str, out_dir: Path, fmt: str | None = None) -> Path:
    """Read ``path`` and write ``out_dir/index.html`` with its call tree and timeline; return the page."""
    from ..flow.outputs import run_page
    from ..readers import read

    pag = read(path, format=fmt)
    summary = pag.summary()
    facts = {k: summary[k] for k in ("source", "format", "processes", "threads", "vertices") if k in summary}
    subtitle = ", ".join(f"{k} {v}" for k, v in facts.items())
    page = run_page({}, pag, title=f"perflow: {Path(path).name}", subtitle=subtitle)
    from .._atomic import write_text

    index = write_text(out_dir / "index.html", page)
    return index


def _serve(directory: Path, port: int) -> None:  # pragma: no cover - interactive
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        print(f"perflow: serving http://127.0.0.1:{httpd.server_address[1]}/index.html (Ctrl-C stops)", flush=True)
        httpd.serve_forever()


def run(args: argparse.Namespace) -> int:
    """Find or write the page, then open or serve it."""
    src = Path(args.path)
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such file or directory")
    if src.is_dir() and (src / "index.html").is_file() and args.output is None:
        index = src / "index.html"
    else:
        out = Path(args.output) if args.output else Path(tempfile.mkdtemp(prefix="perflow-view-"))
        index = build_page(str(src), out, args.format)
    print(f"perflow: page {index.resolve()}")
    if args.serve:
        _serve(index.parent, args.port)
    elif not args.no_open:
        import webbrowser

        if not webbrowser.open(index.resolve().as_uri()):
            print("perflow: no browser to open it; open the file above, or use --serve", file=sys.stderr)
    return 0
