"""``perflow info PATH``: what a data source or saved PAG holds."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register", "describe"]


def register(sub: Any) -> None:
    """Add the ``info`` subcommand."""
    p = sub.add_parser(
        "info",
        help="summarise a trace, profile or saved PAG",
        description="Read PATH (any supported format, or a saved PAG) and print what it holds.",
    )
    p.add_argument("path", help="file or directory to read")
    p.add_argument("--format", help="force the input format instead of detecting it")
    p.add_argument("--top", type=int, default=10, help="number of hotspots to list (default 10)")
    p.set_defaults(func=run)


def _fmt_time(s: float) -> str:
    from ..units import format_value

    return format_value(s, "s")


def describe(pag: Any, *, top: int = 10) -> str:
    """A plain-text summary of a PAG: sizes, metrics, trace statistics and hotspots."""
    from ..pag.sites import call_site_paths
    from ..units import aggregate_label

    s = pag.summary()
    lines = []
    if "source" in s:
        lines.append(f"source      {s['source']}" + (f"  ({s['format']})" if "format" in s else ""))
    lines.append(f"processes   {s['processes']}   threads/process {s['threads']}")
    lines.append(f"vertices    {s['vertices']}   metric rows {s['metric rows']}")
    lines.append("metrics     " + ", ".join(s["metrics"]))
    tr = pag.trace
    if tr is not None:
        t0, t1 = tr.span
        lines.append(
            f"trace       {tr.n_intervals} region instances, {len(tr.messages)} messages, "
            f"{s['collective instances']} collective instances, span {_fmt_time(t1 - t0)}"
        )
        gpu = _gpu_line(pag)
        if gpu:
            lines.append(gpu)
        for key, what in (
            ("clock_violations", "messages violate the clock condition (received before sent)"),
            ("unmatched_sends", "sends found no receive"),
            ("unmatched_recvs", "receives found no send"),
            ("closed_open_instances", "region instances were left open and closed at the end"),
        ):
            n = int(pag.attrs.get(key, 0) or 0)
            if n:
                lines.append(f"warning     {n} {what}")
    for kind, n in sorted((pag.attrs.get("damage") or {}).items()):
        lines.append(f"warning     {int(n)} {kind}")
    if pag.attrs.get("stopped"):  # perflow record stopped the run (time limit, Ctrl-C, killed)
        lines.append(f"incomplete  {pag.attrs['stopped']}")
    for note in str(pag.attrs.get("incomplete") or "").splitlines():  # an interrupted or crashed recording
        lines.append(f"incomplete  {note}")
    metric = next((m for m in ("time_exc", "time_inc") if m in pag.metric_names), None)
    if metric and pag.n_vertices:
        hot = pag.vertices.sort_by(metric, agg="sum").top(top)
        total = float(pag.aggregate(metric, "sum").sum())
        mx = pag.aggregate(metric, "max").to_numpy()
        lines.append("")
        over = aggregate_label("sum", len(pag.processes), len(pag.locations))
        lines.append(f"top {len(hot)} by {metric} ({over})")
        lines.append(f"  {'share':>6}  {'sum':>12}  {'max/process':>12}  vertex")
        agg = pag.aggregate(metric, "sum").to_numpy()
        paths = call_site_paths(pag)
        for v in hot.ids.tolist():
            share = agg[v] / total if total else 0.0
            lines.append(f"  {share:6.1%}  {_fmt_time(agg[v]):>12}  {_fmt_time(mx[v]):>12}  {paths[v]}")
    return "\n".join(lines)


def describe_ensemble(ens: Any, *, top: int = 10) -> str:
    """A plain-text summary of an ensemble of runs: the runs with their metadata, the call paths, the hotspots."""
    meta = ens.metadata
    cols = [c for c in ("format", "nprocs", "nthreads", "date", "host", "command") if c in meta.columns]
    cols = [c for c in cols if meta[c].notna().any()]
    lines = [f"ensemble    {len(ens)} runs"]
    table = meta[cols].astype(object).where(meta[cols].notna(), "").to_string()
    lines += ["  " + line for line in table.splitlines()]
    tree = ens.tree
    n_all = int((tree["n_runs"] == len(ens)).sum())
    lines.append(f"call paths  {len(tree)} in the union, {n_all} in every run")
    pags = list(ens)
    metric = next((m for m in ("time_exc", "time_inc") if all(m in p.metric_names for p in pags)), None)
    if metric and len(tree):
        st = ens.stats(metric, agg="sum").sort_values("mean", ascending=False).head(top)
        lines.append("")
        lines.append(f"top {len(st)} by mean {metric} over the runs (a run's value: sum over its processes)")
        lines.append(f"  {'mean':>12}  {'min':>12}  {'max':>12}  runs  call path")
        for _, r in st.iterrows():
            lines.append(
                f"  {_fmt_time(r['mean']):>12}  {_fmt_time(r['min']):>12}  {_fmt_time(r['max']):>12}  "
                f"{int(r['n_runs']):>4}  {r['call_path']}"
            )
    return "\n".join(lines)


def _gpu_line(pag: Any) -> str:
    """``gpu  2 streams on 1 device: 5 kernels, 15 copies; busy 385 ms, idle 1.65 s (19% busy)`` (empty: no GPU)."""
    import numpy as np

    from ..sdk.profile import categories

    gl = pag.trace.locations_of_type("gpu")
    if not len(gl):
        return ""
    a = pag.attrs

    def n(key: str, one: str, many: str) -> str:
        k = int(a.get(key, 0) or 0)
        return f"{k} {one if k == 1 else many}"

    m = pag.metrics
    idx = m.index
    key = idx.get_level_values("process").to_numpy() * (1 << 24) + idx.get_level_values("thread").to_numpy()
    on_gpu = np.isin(key, gl["process"].to_numpy() * (1 << 24) + gl["thread"].to_numpy())
    cat = categories(pag)[idx.get_level_values("vertex").to_numpy()]
    exc = m["time_exc"].to_numpy()
    busy = float(exc[on_gpu & (cat == "gpu")].sum())
    idle = float(exc[on_gpu & (cat == "idle")].sum())
    share = f" ({busy / (busy + idle):.1%} busy)" if busy + idle > 0 else ""
    what = [n("gpu_kernels", "kernel", "kernels"), n("gpu_copies", "copy", "copies")]
    if a.get("gpu_sets"):
        what.append(n("gpu_sets", "set", "sets"))
    devices = f"{n('gpu_devices', 'device', 'devices')}" if "gpu_devices" in a else ""
    streams = f"{len(gl)} stream{'s' if len(gl) != 1 else ''}" + (f" on {devices}" if devices else "")
    return (
        f"gpu         {streams}: {', '.join(what)}; busy {_fmt_time(busy)}, idle {_fmt_time(idle)}{share}; "
        f"{n('gpu_launches_linked', 'launch', 'launches')} and {n('gpu_waits_linked', 'wait', 'waits')} linked"
    )


def run(args: argparse.Namespace) -> int:
    """Read the path and print the summary (of one run, or of the ensemble a folder of runs holds)."""
    from ..readers import read

    data = read(args.path, format=args.format)
    if hasattr(data, "stats") and hasattr(data, "metadata") and not hasattr(data, "summary"):
        print(describe_ensemble(data, top=args.top), file=sys.stdout)
    else:
        print(describe(data, top=args.top), file=sys.stdout)
    return 0
