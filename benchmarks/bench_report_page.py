"""Benchmark: the ``critical_path`` run page (``--output DIR/index.html``) of a large trace, built and opened.

Runs the critical_path flow on a trace (an OTF2 archive, a saved PAG, anything perflow reads),
writes every output and the page as ``perflow run critical_path --output DIR`` does, and prints
the page's size by section; then opens it in headless Chromium (Playwright with the system
browser, ``/usr/bin/chromium``) and prints the time until the ``load`` event and until the
timeline and the profile panes have decoded their data and drawn. The issue-27 targets for
20 M events (``benchmarks/make_otf2_trace.py --events 20e6``): a page under 10 MB that opens in
under 5 s.

    python benchmarks/make_otf2_trace.py --events 20e6 --out /tmp/otf2-20M      # once (~3 GB to read)
    python benchmarks/bench_report_page.py /tmp/otf2-20M/traces.otf2 --out /tmp/page-20M
"""

from __future__ import annotations

import argparse
import re
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import perflow  # noqa: E402
from perflow.flow.outputs import write_outputs  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def sections(page: str) -> list[tuple[str, int]]:
    """(section id, characters) of the page, in order; ``head`` is everything before the first."""
    marks = [(m.start(), m.group(1)) for m in re.finditer(r'<(?:section|details)[^>]* id="([^"]+)"', page)]
    out = [("head (styles, Bokeh's JavaScript)", marks[0][0] if marks else len(page))]
    marks.append((len(page), ""))
    out += [(n, b - a) for (a, n), (b, _) in zip(marks, marks[1:])]
    return out


def open_in_chromium(index: Path, runs: int) -> list[dict[str, float]]:
    """Open the page ``runs`` times: seconds to the load event, and until the timeline and panes are drawn."""
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as pw:
        b = pw.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"], headless=True
        )
        for _ in range(runs):
            pg = b.new_page(viewport={"width": 1300, "height": 1000})
            cdp = pg.context.new_cdp_session(pg)
            cdp.send("Performance.enable")
            errors: list[str] = []
            pg.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            t = time.perf_counter()
            pg.goto(index.resolve().as_uri(), wait_until="load", timeout=120_000)
            loaded = time.perf_counter() - t
            pg.wait_for_function(
                "(document.getElementById('pf-timeline') === null || document.getElementById('pf-timeline').dataset.ready)"
                " && (document.getElementById('pf-panes') === null || document.getElementById('pf-panes').dataset.ready)",
                timeout=120_000,
                polling=50,
            )
            ready = time.perf_counter() - t
            m = {x["name"]: x["value"] for x in cdp.send("Performance.getMetrics")["metrics"]}
            # the main thread's busy time (scripts, layout, painting): what a loaded machine inflates least
            busy = m.get("TaskDuration", float("nan"))
            cpu = m.get("ThreadTime", float("nan"))  # the main thread's CPU time: what other programs inflate least
            out.append({"load": loaded, "ready": ready, "busy": busy, "cpu": cpu, "errors": len(errors)})
            pg.close()
        b.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", help="the trace to analyse (OTF2 archive, saved PAG, ...)")
    ap.add_argument("--out", default="/tmp/perflow-page-bench", help="output folder of the run (default %(default)s)")
    ap.add_argument("--opens", type=int, default=3, help="times to open the page in Chromium (default 3)")
    ap.add_argument("--page", metavar="INDEX", help="only open this page (an index.html written before)")
    a = ap.parse_args()
    if a.page:
        _open(Path(a.page), a.opens)
        return
    t, c = time.perf_counter(), _cpu()
    pag = perflow.read(a.trace)
    print(f"read: {time.perf_counter() - t:.1f} s ({_cpu() - c:.1f} s CPU), {pag.trace.n_intervals:,} intervals")
    t, c = time.perf_counter(), _cpu()
    result = perflow.run("critical_path", pag=pag)
    print(f"flow: {time.perf_counter() - t:.1f} s ({_cpu() - c:.1f} s CPU)")
    t, c = time.perf_counter(), _cpu()
    paths = write_outputs(result, a.out)
    print(f"outputs and page: {time.perf_counter() - t:.1f} s ({_cpu() - c:.1f} s CPU)")
    index = paths["index"]
    page = index.read_text(encoding="utf-8")
    size = len(page.encode("utf-8"))
    for name, n in sections(page):
        print(f"  {name:40s} {n / 1e6:7.2f} MB")
    print(f"page {index}: {size / 1e6:.2f} MB (target < 10 MB: {'ok' if size < 10e6 else 'MISSED'})")
    _open(index, a.opens)
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


def _open(index: Path, n: int) -> None:
    a = argparse.Namespace(opens=n)
    try:
        opens = open_in_chromium(index, a.opens)
    except ImportError:
        print("Playwright is not installed: the page was not opened")
        return
    for o in opens:
        print(
            f"  opened: load event {o['load']:.2f} s, timeline and panes drawn {o['ready']:.2f} s "
            f"(main thread busy {o['busy']:.2f} s, {o['cpu']:.2f} s of CPU), {o['errors']} errors"
        )
    best = sorted(o["ready"] for o in opens)[len(opens) // 2]
    busy = sorted(o["busy"] for o in opens)[len(opens) // 2]
    cpu = sorted(o["cpu"] for o in opens)[len(opens) // 2]
    print(f"median: drawn after {best:.2f} s, the main thread busy {busy:.2f} s, {cpu:.2f} s of CPU (target < 5 s)")


if __name__ == "__main__":
    main()
