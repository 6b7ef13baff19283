"""Values checked where they are read (perflow/readers/_values.py): the damaged values of issue 25, reader by reader.

Each case damages one value of a real or generated sample (negative, NaN,
infinite, 1e300, backwards, outside the run, an event outside its call) and
asserts that the reader refuses it with a FormatError naming the file and the
value (or, for survivable damage, reads it and counts the damage).
"""

from __future__ import annotations

import cProfile
import gzip
import json
import marshal
import re
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import perflow
from perflow.errors import FormatError
from tests.conftest import REPO, shared_data_dir
from tests.fuzz.mutators import _cube_members, _cube_write

DATA = REPO / "tests" / "data"
SHARED = shared_data_dir()


def refused(path: Path, fmt: str, *needles: str) -> str:
    """Read ``path``: it must be a FormatError naming the file and every needle (the record, the value)."""
    with pytest.raises(FormatError) as ei:
        perflow.read(path, format=fmt)
    msg = str(ei.value)
    assert str(path) in msg or path.name in msg, msg
    for n in needles:
        assert n in msg, f"{n!r} not in: {msg}"
    assert "np.float64" not in msg and "np.int64" not in msg, msg
    assert not getattr(ei.value, "unexpected", False), msg
    return msg


def need_shared(*parts: str) -> Path:
    p = SHARED.joinpath(*parts) if SHARED else None
    if p is None or not p.exists():
        pytest.skip(f"shared data {'/'.join(parts)} absent")
    return p


# ---------------------------------------------------------------------------------------------- cProfile
def _work(n: int) -> int:
    return n if n < 2 else _work(n - 1) + _work(n - 2)


@pytest.fixture(scope="module")
def pstats_stats() -> dict:
    pr = cProfile.Profile()
    pr.enable()
    _work(12)
    sorted(str(i) for i in range(100))
    pr.disable()
    pr.create_stats()
    return dict(pr.stats)  # type: ignore[attr-defined]


def _pstats(tmp: Path, stats: dict, func: str, edit) -> Path:  # type: ignore[no-untyped-def]
    st = {k: (v[0], v[1], v[2], v[3], dict(v[4])) for k, v in stats.items()}
    k = next(k for k in st if k[2] == func)
    st[k] = edit(st[k])
    f = tmp / "rank0.pstats"
    f.write_bytes(marshal.dumps(st))
    return f


@pytest.mark.parametrize(
    ("case", "edit", "needle"),
    [
        ("negative visits", lambda v: (v[0], -13_200_000, *v[2:]), "-13200000"),
        ("negative own time", lambda v: (v[0], v[1], -0.5, *v[3:]), "-0.5"),
        ("infinite inclusive time", lambda v: (*v[:3], float("inf"), v[4]), "inf"),
        ("own time over inclusive time", lambda v: (v[0], v[1], v[3] + 1.0, v[3], v[4]), "exceeds"),
        (
            "negative caller edge",
            lambda v: (*v[:4], {c: (e[0], e[1], -1.0, e[3]) for c, e in v[4].items()}),
            "-1",
        ),
    ],
)
def test_cprofile(tmp_path: Path, pstats_stats: dict, case: str, edit, needle: str) -> None:  # type: ignore[no-untyped-def]
    f = _pstats(tmp_path, pstats_stats, "_work", edit)
    refused(f, "cprofile", "_work", needle)


# -------------------------------------------------------------------------------------------------- CUBE
def _cube(tmp: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    src = need_shared("cube", "scorep-cpi", "profile.cubex")
    f = tmp / "profile.cubex"
    members = _cube_members(src)
    anchor = next(d for m, d in members if m.name == "anchor.xml").decode()
    mid = re.search(r'<metric id="(\d+)"[^>]*>\s*<disp_name>[^<]*</disp_name>\s*<uniq_name>time<', anchor)
    assert mid, "no time metric"
    i = next(k for k, (m, _) in enumerate(members) if m.name == f"{mid[1]}.data")
    members[i] = (members[i][0], edit(members[i][1]))
    _cube_write(f, members)
    return f


def _cube_value(data: bytes, k: int, v: float) -> bytes:
    """Replace the k-th double of a CUBEX.DATA member (little endian)."""
    assert data.startswith(b"CUBEX.DATA")
    a = bytearray(data)
    np.frombuffer(a, dtype="<f8", offset=10)  # the layout: header then doubles
    a[10 + 8 * k : 18 + 8 * k] = np.float64(v).tobytes()
    return bytes(a)


@pytest.mark.parametrize(
    ("case", "k", "value", "needle"),
    [
        ("negative total", 0, -77.3, "-77.3"),
        ("NaN", 3, float("nan"), "nan"),
        ("infinite", 2, float("inf"), "inf"),
        ("1e300 below its parent", 9, 1e300, "1e+300"),
        ("child over its parent", 9, 1e4, "exceeds"),
    ],
)
def test_cube(tmp_path: Path, case: str, k: int, value: float, needle: str) -> None:
    f = _cube(tmp_path, lambda d: _cube_value(d, k, value))
    refused(f, "cube", needle)


def test_cube_rounding_negative_is_zero(tmp_path: Path) -> None:
    """A time of -1.7e-13 s (a sum minus a sum, rounded) is read as 0, not refused; -1e-3 still is."""

    f = _cube(tmp_path, lambda d: _cube_value(d, 16, -1.7e-13))
    pag = perflow.read(f, format="cube")
    assert float(pag.metrics[["time_exc", "time_inc"]].min().min()) >= 0.0
    clean = perflow.read(need_shared("cube", "scorep-cpi", "profile.cubex"), format="cube")
    assert clean.metrics["time_inc"].sum() - pag.metrics["time_inc"].sum() == pytest.approx(
        3.66579451e-04, rel=1e-6
    )  # that value is 0
    (tmp_path / "big").mkdir()
    g = _cube(tmp_path / "big", lambda d: _cube_value(d, 16, -1e-3))
    refused(g, "cube", "-0.001")


# ------------------------------------------------------------------------------------ JSON tree readers
def _json_edit(src: Path, tmp: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    doc = json.loads(src.read_text())
    edit(doc)
    f = tmp / src.name
    f.write_text(json.dumps(doc))  # NaN and Infinity as JavaScript writes them (json allows them)
    return f


def _hatchet_set(node: int, col: str, v: float):  # type: ignore[no-untyped-def]
    def edit(doc: dict) -> None:
        next(r for r in doc["dataframe"] if r["node"] == node)[col] = v

    return edit


@pytest.mark.parametrize(
    ("case", "edit", "needle"),
    [
        ("negative exclusive", _hatchet_set(1, "time", -5.0), "-5"),
        ("negative inclusive", _hatchet_set(0, "time (inc)", -135.0), "-135"),
        ("NaN", _hatchet_set(2, "time", float("nan")), "nan"),
        ("Infinity", _hatchet_set(3, "time (inc)", float("inf")), "inf"),
        ("1e300", _hatchet_set(3, "time", 1e300), "1e+300"),
    ],
)
def test_hatchet(tmp_path: Path, case: str, edit, needle: str) -> None:  # type: ignore[no-untyped-def]
    refused(_json_edit(DATA / "hatchet" / "hatchet-graph-literal.json", tmp_path, edit), "hatchet", needle)


def _pyi_frame(doc: dict, depth: int) -> dict:
    fr = doc["root_frame"]
    for _ in range(depth):
        fr = fr["children"][0]
    return fr


@pytest.mark.parametrize(
    ("case", "depth", "value", "needle"),
    [
        ("negative time", 2, -0.25, "-0.25"),
        ("Infinity", 1, float("inf"), "inf"),
        ("NaN", 2, float("nan"), "nan"),
        ("child over its parent", 2, 50.0, "exceeds"),
    ],
)
def test_pyinstrument(tmp_path: Path, case: str, depth: int, value: float, needle: str) -> None:
    def edit(doc: dict) -> None:
        _pyi_frame(doc, depth)["time"] = value

    refused(_json_edit(DATA / "pyinstrument" / "work.pyinstrument.json", tmp_path, edit), "pyinstrument", needle)


def _timemory_set(key: str, v: float):  # type: ignore[no-untyped-def]
    """Set the first node's inclusive ``repr_data`` (its time) or its ``stats.count`` (its visits)."""

    def edit(doc: dict) -> None:
        first = doc["timemory"]["WALL_CLOCK"]["mpi"][0][0]
        node = first["children"][0]["node"] if first["node"].get("hash") == 0 else first["node"]
        if key == "count":
            node["inclusive"]["stats"]["count"] = v
        else:
            node["inclusive"]["entry"]["repr_data"] = v

    return edit


@pytest.mark.parametrize(
    ("case", "key", "value", "needle"),
    [
        ("negative time", "repr_data", -4.0, "-4"),
        ("NaN time", "repr_data", float("nan"), "nan"),
        ("negative count", "count", -3, "-3"),
    ],
)
def test_timemory(tmp_path: Path, case: str, key: str, value: float, needle: str) -> None:
    refused(_json_edit(DATA / "timemory" / "wall.tree.json", tmp_path, _timemory_set(key, value)), "timemory", needle)


# --------------------------------------------------------------------------------------------------- TAU
@pytest.mark.parametrize(
    ("case", "field", "value", "needle"),
    [
        ("negative exclusive", 4, "-17983", "-17983"),
        ("negative calls", 2, "-1", "-1"),
        ("NaN inclusive", 5, "nan", "nan"),
        ("exclusive over inclusive", 4, "99999", "exceeds"),
    ],
)
def test_tau(tmp_path: Path, case: str, field: int, value: str, needle: str) -> None:
    src = need_shared("tau", "cpi-mpi")
    d = tmp_path / "cpi-mpi"
    shutil.copytree(src, d)
    f = d / "profile.0.0.0"
    lines = f.read_text().splitlines(keepends=True)
    i = next(k for k, ln in enumerate(lines) if ln.startswith('"MPI_Init()  " '))
    m = re.match(r'^(".*?") (\S+) (\S+) (\S+) (\S+) (.*)$', lines[i], re.S)
    assert m
    parts = [m[1], m[2], m[3], m[4], m[5], m[6]]
    parts[field - 1] = value
    lines[i] = " ".join(parts)
    f.write_text("".join(lines))
    refused(d, "tau", "MPI_Init", needle)


# ----------------------------------------------------------------------------------------------- Caliper
@pytest.mark.parametrize(
    ("case", "slot", "value", "needle"),
    [
        ("negative time", 2, "-0.024836", "-0.024836"),
        ("NaN time", 3, "nan", "nan"),
        ("negative count", 4, "-2", "-2"),
    ],
)
def test_caliper_cali(tmp_path: Path, case: str, slot: int, value: str, needle: str) -> None:
    src = need_shared("caliper", "lulesh-cali", "lulesh-annotation-profile.cali")
    f = tmp_path / src.name
    lines = src.read_text().splitlines(keepends=True)
    i = next(k for k, ln in enumerate(lines) if ln.startswith("__rec=ctx,ref=155,"))
    head, data = lines[i].rstrip("\n").split(",data=")
    vals = data.split("=")
    vals[slot] = value
    lines[i] = f"{head},data={'='.join(vals)}\n"
    f.write_text("".join(lines))
    refused(f, "caliper", needle)


@pytest.mark.parametrize(
    ("case", "col", "value", "needle"),
    [
        ("negative time", "sum#time.duration", -309432.0, "-0.309432"),
        ("Infinity", "sum#time.duration", float("inf"), "inf"),
        ("1e300", "sum#time.duration", 1e300, "1e+294"),
        ("negative count", "count", -62, "-62"),
    ],
)
def test_caliper_json(tmp_path: Path, case: str, col: str, value: float, needle: str) -> None:
    src = need_shared("caliper", "cpi-json", "cpi-callpath-profile.json")

    def edit(doc: dict) -> None:
        doc["data"][0][doc["columns"].index(col)] = value

    refused(_json_edit(src, tmp_path, edit), "caliper", needle)


# ----------------------------------------------------------------------------------------------- rocprof
def _rocprof(tmp: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    import csv

    d = tmp / "rocprof"
    shutil.copytree(DATA / "rocprof" / "v3-docs-two-streams", d)
    f = d / "kernel_trace.csv"
    with open(f, newline="") as fh:
        rows = list(csv.reader(fh))
    cols = [c.strip().lower() for c in rows[0]]
    edit(rows[1], cols.index("start_timestamp"), cols.index("end_timestamp"))
    with open(f, "w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_MINIMAL).writerows(rows)
    return d


def _set(**kv):  # type: ignore[no-untyped-def]
    def edit(row: list[str], s: int, e: int) -> None:
        if "end_plus" in kv:
            row[e] = str(int(row[e].strip('"')) + kv["end_plus"])
        if "start" in kv:
            row[s] = kv["start"]
        if "end" in kv:
            row[e] = kv["end"]

    return edit


@pytest.mark.parametrize(
    ("case", "edit", "needle"),
    [
        ("a kernel of 4,828,386 s", _set(end_plus=4_828_386 * 10**9), "s away from every other"),
        ("ends before it starts", _set(end="1"), "before it starts"),
        ("negative start", _set(start="-5"), "-5"),
        ("NaN time stamp", _set(start="nan"), "'nan'"),
    ],
)
def test_rocprof(tmp_path: Path, case: str, edit, needle: str) -> None:  # type: ignore[no-untyped-def]
    d = _rocprof(tmp_path, edit)
    refused(d, "rocprof", needle)


# -------------------------------------------------------------------------------------------------- nsys
def _nsys(tmp: Path, sql: str, name: str = "run.sqlite") -> Path:
    f = tmp / name
    shutil.copyfile(DATA / "nsys" / "saxpy-mpi-cuda.sqlite", f)
    con = sqlite3.connect(f)
    con.executescript(sql)
    con.commit()
    con.close()
    return f


_K = "CUPTI_ACTIVITY_KIND_KERNEL"


@pytest.mark.parametrize(
    ("case", "sql", "needle"),
    [
        (
            "REAL 1e300 end",
            f"UPDATE {_K} SET end = 1e300 WHERE rowid = (SELECT min(rowid) FROM {_K});",
            "1e+300",
        ),
        ("negative start", f"UPDATE {_K} SET start = -7, end = -3 WHERE rowid = (SELECT min(rowid) FROM {_K});", "-7"),
        (
            "fractional time",
            f"UPDATE {_K} SET start = start + 0.5 WHERE rowid = (SELECT min(rowid) FROM {_K});",
            ".5",
        ),
        (
            "kernel table replaced by a view",
            f"CREATE TABLE k2 AS SELECT * FROM {_K}; DROP TABLE {_K}; CREATE VIEW {_K} AS SELECT * FROM k2 LIMIT 1;",
            "view",
        ),
    ],
)
def test_nsys(tmp_path: Path, case: str, sql: str, needle: str) -> None:
    refused(_nsys(tmp_path, sql), "nsys", needle)


# ------------------------------------------------------------------------------------------------ Chrome
def _chrome(tmp: Path, events: list[dict]) -> Path:
    f = tmp / "trace.json"
    f.write_text(json.dumps({"traceEvents": events}))
    return f


def _events() -> list[dict]:
    return [
        {"ph": "X", "name": "main", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 1000.0},
        {"ph": "X", "name": "solve", "pid": 1, "tid": 1, "ts": 1100.0, "dur": 500.0},
        {"ph": "X", "name": "kernel", "pid": 1, "tid": 1, "ts": 1200.0, "dur": 100.0},
        {"ph": "X", "name": "io", "pid": 1, "tid": 1, "ts": 1700.0, "dur": 200.0},
        {"ph": "s", "cat": "message", "name": "m", "id": 1, "pid": 1, "tid": 1, "ts": 1150.0, "args": {"bytes": 8}},
        {"ph": "f", "cat": "message", "name": "m", "id": 1, "pid": 1, "tid": 1, "ts": 1750.0, "bp": "e"},
    ]


def test_chrome_pristine_reads(tmp_path: Path) -> None:
    pag = perflow.read(_chrome(tmp_path, _events()), format="chrome")
    assert pag.trace.n_intervals == 4


@pytest.mark.parametrize(
    ("case", "index", "key", "value", "needle"),
    [
        ("negative dur re-parents children", 1, "dur", -100.0, "dur -100 is negative"),
        ("Infinity dur", 2, "dur", float("inf"), "dur inf"),
        ("Infinity ts", 2, "ts", float("inf"), "ts inf"),
        ("NaN ts", 3, "ts", float("nan"), "ts"),
        ("ts of -1e18", 3, "ts", -1e18, "-1e+18"),
        ("negative message bytes", 4, "args", {"bytes": -64}, "-64"),
    ],
)
def test_chrome(tmp_path: Path, case: str, index: int, key: str, value: object, needle: str) -> None:
    ev = _events()
    ev[index][key] = value
    msg = refused(_chrome(tmp_path, ev), "chrome", needle)
    if key != "args":
        assert f"event {index}" in msg, msg


def test_chrome_flow_without_end_is_counted(tmp_path: Path) -> None:
    ev = _events()[:-1]
    pag = perflow.read(_chrome(tmp_path, ev), format="chrome")
    assert pag.attrs["damage"] == {"message flows without a start or an end dropped": 1}
    from perflow.cli.info import describe

    assert "1 message flows without a start or an end dropped" in describe(pag)


def test_chrome_gz_value(tmp_path: Path) -> None:
    ev = _events()
    ev[1]["dur"] = -100.0
    f = tmp_path / "t.json.gz"
    f.write_bytes(gzip.compress(json.dumps(ev).encode()))
    refused(f, "chrome", "dur -100")


# -------------------------------------------------------------------------------------------------- OTF2
def _otf2(tmp: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    from perflow.synthetic import raw_trace
    from perflow.writers.otf2 import write_otf2

    raw = raw_trace(nprocs=2, iterations=2)
    edit(raw)
    out = tmp / "run"
    write_otf2(raw, out)
    return out / "traces.otf2"


def _send_after_leave(raw) -> None:  # type: ignore[no-untyped-def]
    p = raw.p2p_events
    ev = raw.region_events
    i = int(np.flatnonzero(p["kind"] == 1)[0])  # an MpiIsend
    k = int(p["pos"][i])  # the region event after it: the Leave of its MPI call
    p["pos"][i] = k + 1
    p["time"][i] = ev["time"][k]


def _negative_bytes(raw) -> None:  # type: ignore[no-untyped-def]
    raw.p2p_events["bytes"][int(np.flatnonzero(raw.p2p_events["kind"] == 1)[0])] = -1000  # an MpiIsend


def test_otf2_pristine(tmp_path: Path) -> None:
    perflow.read(_otf2(tmp_path, lambda raw: None), format="otf2")


@pytest.mark.parametrize(
    ("case", "edit", "needle"),
    [
        ("MpiSend after its Leave", _send_after_leave, "outside any MPI call"),
        ("bytes -1000", _negative_bytes, "bytes"),
    ],
)
def test_otf2(tmp_path: Path, case: str, edit, needle: str) -> None:  # type: ignore[no-untyped-def]
    refused(_otf2(tmp_path, edit), "otf2", needle)


# ------------------------------------------------------------------------------------------ the layer
def test_values_layer_messages() -> None:
    from perflow.readers._values import Values, show

    v = Values("f.dat")
    with pytest.raises(FormatError, match=r"f.dat: record 3: visits -1 is negative"):
        v.count(-1, "record 3", "visits")
    with pytest.raises(FormatError, match=r"time nan is not a finite number"):
        v.seconds(float("nan"), "r", "time")
    with pytest.raises(FormatError, match=r"row 1: t 1e\+300 is not a whole number that fits 64 bits"):
        v.int_column(np.array([1.0, 1e300]), "t")
    with pytest.raises(FormatError, match=r"ends \(1\) before it starts \(2\)"):
        v.intervals(np.array([0.0, 2.0]), np.array([1.0, 1.0]))
    assert [show(x) for x in (np.float64(5e-06), np.int64(3), 1e300, -0.0)] == ["5e-06", "3", "1e+300", "0"]


# ---------------------------------------------------------------------------------------- the span check
def _outlier(t: np.ndarray) -> bool:
    """The definition of Values.span, by sorting: the widest gap >= OUTLIER_GAP and >= 1000x the rest."""
    from perflow.readers._values import MAX_SECONDS, OUTLIER_GAP

    st = np.sort(t)
    gap = float(np.diff(st).max())
    total = float(st[-1] - st[0])
    return (gap >= OUTLIER_GAP and gap >= 1000 * (total - gap)) or total > MAX_SECONDS


@pytest.mark.parametrize("seed", range(4))
def test_span_linear_path_agrees_with_the_sorted_definition(seed: int) -> None:
    """The span check decides the usual case without sorting; near the thresholds it agrees with sorting."""
    from perflow.readers._values import OUTLIER_GAP, Values

    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(2, 200))
        t = rng.uniform(0, 10.0 ** rng.uniform(-3, 8), n)
        if rng.random() < 0.6:  # two clusters, the gap near 1000x the rest
            rest = float(np.ptp(t)) or 1.0
            far = rng.choice(n, int(rng.integers(1, n)), replace=False)
            t[far] += max(OUTLIER_GAP * rng.uniform(0.5, 2), rest * 1000 * rng.uniform(0.99, 1.01))
        try:
            Values("f").span(t)
            got = False
        except FormatError:
            got = True
        assert got == _outlier(t), (n, float(np.ptp(t)))
