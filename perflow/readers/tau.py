"""TAU profiles: a directory of ``profile.N.C.T`` files (node N, context C, thread T).

Each file lists, per timer, ``"name" calls subrs excl incl profilecalls
GROUP="..."``. With callpath profiling (``TAU_CALLPATH``), timers named
``"a => b => c"`` give the calling context; the flat timers then only repeat
their totals and are used for the roots. Without callpath timers, the profile
is flat: every timer becomes a child of the top-level timer (``.TAU
application``, or a synthetic ``<program>`` root when absent).

Times are microseconds in the files and seconds in the PAG. Multi-metric runs
(``MULTI__<metric>/`` subdirectories) give one pair of metrics per directory:
``time_inc``/``time_exc`` for ``TIME``, ``<metric>_inc``/``<metric>_exc`` for a
counter. Processes are the node numbers N; threads are the thread numbers T
(contexts C are folded onto threads as ``C * 1000 + T`` when not all 0).
User events (``userevents`` sections) are not read.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..kinds import classify_region
from ..pag.pag import PAG, MetricInfo
from ._common import MetricRows, TreeBuilder, build_profile, head_bytes, reader_errors
from ._values import Values, show

FORMAT = "tau"
DESCRIPTION = "TAU profiles (directory of profile.N.C.T files, flat or callpath, MULTI__ metric directories)"

_FILE_RE = re.compile(r"^profile\.(\d+)\.(\d+)\.(\d+)$")
_LINE_RE = re.compile(r'^"(.*)"\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*(?:GROUP="([^"]*)")?')
_META_RE = re.compile(r"<attribute><name>(.*?)</name><value>(.*?)</value></attribute>", re.S)


def _profile_files(d: Path) -> list[tuple[tuple[int, int, int], Path]]:
    out = []
    for f in d.iterdir():
        m = _FILE_RE.match(f.name)
        if m and f.is_file():
            out.append(((int(m[1]), int(m[2]), int(m[3])), f))
    return sorted(out)


def _metric_dirs(path: Path) -> list[tuple[str | None, Path]]:
    if path.is_file():
        return [(None, path.parent)]
    multi = sorted(p for p in path.glob("MULTI__*") if p.is_dir())
    if multi:
        return [(p.name[len("MULTI__") :], p) for p in multi]
    return [(None, path)]


def detect(path: Path) -> bool:
    """A profile.N.C.T file, or a directory holding such files (or MULTI__* directories of them)."""
    if path.is_file():
        return bool(_FILE_RE.match(path.name)) and b"templated_functions" in head_bytes(path, 200)
    if path.is_dir():
        for _, d in _metric_dirs(path):
            files = _profile_files(d)
            if files:
                return b"templated_functions" in head_bytes(files[0][1], 200)
    return False


def _clean(name: str) -> str:
    return name.strip()


def _parse_file(f: Path) -> tuple[list[tuple[str, float, float, float, float, str]], str | None, dict[str, str]]:
    text = f.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    if not lines:
        raise FormatError(f, "empty TAU profile")
    m = re.match(r"^(\d+)\s+templated_functions(?:_MULTI_(\S+))?", lines[0])
    if not m:
        raise FormatError(f, "not a TAU profile: first line should be '<n> templated_functions'", where="line 1")
    n = int(m[1])
    metric = m[2]
    meta: dict[str, str] = {}
    if len(lines) > 1:
        meta = dict(_META_RE.findall(lines[1]))
        metric = meta.get("Metric Name", metric)
    if len(lines) < 2 + n:
        raise FormatError(
            f,
            f"truncated: header announces {n} timers, the file has {max(len(lines) - 2, 0)}",
            where=f"line {len(lines)}",
        )
    rows = []
    chk = Values(f)
    for i in range(2, 2 + n):
        mm = _LINE_RE.match(lines[i])
        if not mm:
            raise FormatError(f, f"malformed timer line {lines[i][:80]!r}", where=f"line {i + 1}")
        try:
            calls, _subrs, excl, incl = (float(mm[k]) for k in (2, 3, 4, 5))
        except ValueError:
            raise FormatError(f, f"non-numeric field in timer line {lines[i][:80]!r}", where=f"line {i + 1}") from None
        rec = f"line {i + 1}, timer {mm[1].strip()!r}"
        chk.count(calls, rec, "calls")
        chk.count(_subrs, rec, "subroutine calls")
        chk.number(excl, rec, "exclusive value")
        chk.number(incl, rec, "inclusive value")
        if excl > incl * (1 + 1e-6) + 1e-6:
            chk.fail(rec, f"exclusive value {show(excl)} exceeds the inclusive value {show(incl)}")
        rows.append((mm[1], calls, _subrs, excl, incl, mm[7] or ""))
    _check_tail(f, lines, 2 + n, n)
    return rows, metric, meta


_AGG_RE = re.compile(r"^(\d+)\s+aggregates\s*$")
_UE_RE = re.compile(r"^(\d+)\s+userevents\s*$")


def _check_tail(f: Path, lines: list[str], i: int, n: int) -> None:
    """After the timers: ``<m> aggregates`` (m lines), optionally ``<k> userevents``, a header and k lines; nothing else."""
    end = len(lines)
    while end > i and not lines[end - 1].strip():
        end -= 1
    if i >= end:
        return  # no aggregates section (written by old TAU versions)
    m = _AGG_RE.match(lines[i])
    if not m:
        what = (
            f"one more timer line than the {n} its header announces"
            if _LINE_RE.match(lines[i])
            else f"{lines[i][:60]!r} where '<n> aggregates' should follow the {n} timers"
        )
        raise FormatError(f, f"damaged: {what}", where=f"line {i + 1}")
    i += 1 + int(m[1])
    if i > end:
        raise FormatError(f, f"truncated: the file ends inside its {m[1]} aggregates", where=f"line {end}")
    if i == end:
        return
    u = _UE_RE.match(lines[i])
    if not u:
        raise FormatError(f, f"damaged: {lines[i][:60]!r} where '<n> userevents' should follow", where=f"line {i + 1}")
    k = int(u[1])
    have = end - (i + 2)  # after the userevents line and its '# eventname ...' header
    if k and have < k:
        raise FormatError(f, f"truncated: {k} user events announced, the file has {max(have, 0)}", where=f"line {end}")
    if have > k and (k or have > 0):
        raise FormatError(f, f"damaged: {have} user event lines, the header announces {k}", where=f"line {i + 1}")


def read(path: Path, **options: Any) -> PAG:
    """Read a TAU profile directory (or one ``profile.N.C.T`` file and its siblings).

    Parameters
    ----------
    path : Path
        A directory of ``profile.*`` files, a directory with ``MULTI__*``
        subdirectories, or one of the files.

    Returns
    -------
    PAG
    """
    if options:
        raise TypeError(f"the TAU reader takes no options (got {', '.join(options)})")
    path = Path(path)
    tree = TreeBuilder()
    rows = MetricRows()
    info: dict[str, MetricInfo] = {}
    meta0: dict[str, str] = {}
    nodes: set[int] = set()
    dirs = _metric_dirs(path)
    found = False
    for dir_metric, d in dirs:
        files = _profile_files(d)
        if path.is_file():
            files = [x for x in files if x[1].name == path.name] if len(files) == 1 else files
        for (node, ctx, thr), f in files:
            found = True
            with reader_errors(f, "TAU profile"):
                timers, metric, meta = _parse_file(f)
            metric = (metric or dir_metric or "TIME").strip()
            if not meta0:
                meta0 = meta
            is_time = metric.upper() in (
                "TIME",
                "P_WALL_CLOCK_TIME",
                "WALL_CLOCK",
                "GET_TIME_OF_DAY",
            ) or metric.upper().endswith("TIME")
            scale = 1e-6 if is_time else 1.0
            inc_name, exc_name = ("time_inc", "time_exc") if is_time else (f"{metric}_inc", f"{metric}_exc")
            if not is_time:
                info[inc_name] = MetricInfo(inc_name, "count", "inclusive", f"TAU {metric} (inclusive)")
                info[exc_name] = MetricInfo(exc_name, "count", "exclusive", f"TAU {metric} (exclusive)")
            thread = ctx * 1000 + thr if ctx else thr
            nodes.add(node)
            callpath = any("=>" in t[0] for t in timers)
            callees = {_clean(p) for t in timers if "=>" in t[0] for p in t[0].split("=>")[1:]}
            flat_root = next((t[0] for t in timers if _clean(t[0]) == ".TAU application"), None)
            for name, calls, _subrs, excl, incl, group in timers:
                if callpath:
                    if "=>" in name:
                        parts = [_clean(p) for p in name.split("=>")]
                    elif _clean(name) in callees:
                        continue  # the flat total of a timer that has callpath entries
                    else:
                        parts = [_clean(name)]
                elif flat_root is not None and name != flat_root:
                    parts = [_clean(flat_root), _clean(name)]
                elif flat_root is None:
                    parts = ["<program>", _clean(name)]
                else:
                    parts = [_clean(name)]
                v = -1
                for p in parts:
                    kind = classify_region(p.removesuffix("()").strip()).value
                    if "MPI" in group.split("|") and kind == "function":
                        kind = "mpi"
                    v = tree.add(v, p, p, kind=kind, group=group if p == parts[-1] else "")
                rows.add(v, node, thread, inc_name, incl * scale)
                rows.add(v, node, thread, exc_name, excl * scale)
                if is_time:
                    rows.add(v, node, thread, "visits", calls)
    if not found:
        raise FormatError(path, "no TAU profile.N.C.T files found")
    attrs: dict[str, Any] = {"nprocs": len(nodes), "metadata": meta0}
    return build_profile(tree, rows, info=info, attrs=attrs, source=path)
