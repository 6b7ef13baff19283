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

``--cost`` instead measures what ``--output`` adds to ``perflow run critical_path`` (issue 28: at most
3 s at 20 M events): fresh processes with and without ``--output``, for each trace and each source
tree given (``--trees /work/main .``: main and a branch in the same minutes, runs interleaved), CPU
seconds (user + system, from the operating system), peak RSS and the page's size; medians of
``--repeat``. Several traces (2 M and 20 M events, say) are measured one after the other.

    nice -n 5 python benchmarks/bench_report_page.py /tmp/otf2-2M/traces.otf2 /tmp/otf2-20M/traces.otf2 \
        --cost --trees /work/main . --repeat 3
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
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
    ap.add_argument("trace", nargs="*", help="the trace to analyse (OTF2 archive, saved PAG, ...); --cost: one or more")
    ap.add_argument("--out", default="/tmp/perflow-page-bench", help="output folder of the run (default %(default)s)")
    ap.add_argument("--opens", type=int, default=3, help="times to open the page in Chromium (default 3)")
    ap.add_argument("--page", metavar="INDEX", help="only open this page (an index.html written before)")
    ap.add_argument("--cost", action="store_true", help="measure what --output adds to `perflow run` (see above)")
    ap.add_argument("--trees", nargs="+", default=["."], help="source trees to compare with --cost (PYTHONPATH)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each with --cost (default 3)")
    ap.add_argument("--flow", default="critical_path", help="the flow run with --cost (default %(default)s)")
    ap.add_argument("--no-warm", action="store_true", help="with --cost: no unmeasured first run per tree")
    a = ap.parse_args()
    if a.cost:
        for trace in a.trace:
            output_cost(trace, [str(Path(t).resolve()) for t in a.trees], a.repeat, a.flow, warm=not a.no_warm)
        return
    if a.page:
        _open(Path(a.page), a.opens)
        return
    if len(a.trace) != 1:
        raise SystemExit("give one trace (several only with --cost)")
    a.trace = a.trace[0]
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


def _run(tree: str, trace: str, flow: str, out: str | None) -> dict[str, float]:
    """One ``perflow run`` in a fresh process: CPU seconds (user + system), peak RSS (MiB), page size (MB)."""
    cmd = [sys.executable, "-m", "perflow", "-q", "run", flow, "--input", trace]
    if out is not None:
        cmd += ["--output", out]
    env = dict(os.environ, PYTHONPATH=tree)
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode() if proc.stderr else ""
    if status != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (PYTHONPATH={tree}):\n{err[-2000:]}")
    index = Path(out, "index.html") if out is not None else None
    page = index.stat().st_size / 1e6 if index is not None and index.exists() else 0.0
    return {"cpu": ru.ru_utime + ru.ru_stime, "wall": wall, "rss": ru.ru_maxrss / 1024, "page": page}


def output_cost(trace: str, trees: list[str], repeat: int, flow: str, *, warm: bool = True) -> None:
    """Print, per tree, ``perflow run FLOW`` with and without ``--output`` and the difference (medians)."""
    runs: dict[tuple[str, bool], list[dict[str, float]]] = {(t, o): [] for t in trees for o in (False, True)}
    with tempfile.TemporaryDirectory(prefix="perflow-output-cost-") as tmp:
        for tree in trees if warm else []:  # a first run per tree: compiles what its kernels need, not measured
            _run(tree, trace, flow, str(Path(tmp, "warm")))
        for r in range(repeat):
            for tree in trees:
                for with_output in (False, True):
                    m = _run(tree, trace, flow, str(Path(tmp, f"out-{r}")) if with_output else None)
                    runs[(tree, with_output)].append(m)
                    print(
                        f"  run {r + 1} {tree} {'with' if with_output else 'without'} --output: "
                        f"{m['cpu']:.2f} s CPU, {m['wall']:.2f} s wall, {m['rss']:.0f} MiB, load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
    med = statistics.median
    print(f"{trace}:")
    added = {}
    for tree in trees:
        off, on = runs[(tree, False)], runs[(tree, True)]
        c0, c1 = med(m["cpu"] for m in off), med(m["cpu"] for m in on)
        print(
            f"{tree}: without --output {c0:.2f} s CPU (peak {med(m['rss'] for m in off):.0f} MiB), "
            f"with {c1:.2f} s (peak {med(m['rss'] for m in on):.0f} MiB, page {med(m['page'] for m in on):.2f} MB): "
            f"--output adds {c1 - c0:+.2f} s CPU (median of {repeat}; target at 20 M events: +3 s)"
        )
        added[tree] = c1 - c0
    if len(trees) > 1:
        first = trees[0]
        for tree in trees[1:]:
            print(f"  {tree} against {first}: what --output adds {added[first]:+.2f} -> {added[tree]:+.2f} s CPU")


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
