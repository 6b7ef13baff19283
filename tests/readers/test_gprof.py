"""gprof text and gprof2dot DOT readers: the committed outputs of tests/data/gprof/cg.c, Hatchet's DOT, live runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import perflow
from perflow.cli.main import main
from perflow.errors import FormatError
from perflow.readers import detect_format
from tests.conftest import import_hatchet
from tests.readers.helpers import check_times, fuzz_file, value

DATA = Path(__file__).resolve().parents[1] / "data"
TEXT = DATA / "gprof" / "cg.gprof.txt"
BRIEF = DATA / "gprof" / "cg.gprof-brief.txt"
DOT = DATA / "gprof2dot" / "cg.dot"
CALLGRIND = DATA / "gprof2dot" / "callgrind-cpi.dot"

#: call counts of cg.c, whatever WORK is: (call path, visits)
CALLS = [
    ("main/solve", 3),
    ("main/solve/step", 1200),
    ("main/solve/step/kernel", 1200),
    ("main/walk", 50),  # 5 calls from main + 45 recursive ones, folded into the first
    ("main/walk/kernel", 5),
    ("main/is_even", 22),  # 2 calls from main + 20 from is_odd (the cycle), folded
    ("main/is_even/is_odd", 20),
]


@pytest.fixture(scope="module")
def text() -> perflow.PAG:
    return perflow.read(TEXT)


def test_text_facts(text: perflow.PAG) -> None:
    assert detect_format(TEXT) == "gprof" and detect_format(BRIEF) == "gprof"
    assert text.attrs["format"] == "gprof"
    assert text.attrs["sample_period"] == 0.01 and text.attrs["metadata"]["total_time"] == 2.81
    assert sorted(text.call_paths()) == sorted(["main", "main/setup", "main/setup/kernel"] + [p for p, _ in CALLS])
    for path, calls in CALLS:
        assert value(text, path, "visits") == calls, path
    # [3] solve: self 0.00, children 2.53; [2] step: self 0.33 children 2.20; arc step -> kernel 2.20 s
    assert value(text, "main", "time_inc") == pytest.approx(2.81)
    assert value(text, "main/solve", "time_inc") == pytest.approx(2.53)
    assert value(text, "main/solve/step", "time_inc") == pytest.approx(2.53)
    assert value(text, "main/solve/step", "time_exc") == pytest.approx(0.33)
    assert value(text, "main/solve/step/kernel", "time_exc") == pytest.approx(2.20)
    assert value(text, "main/walk", "time_inc") == pytest.approx(0.23)
    assert value(text, "main/walk", "time_exc") == pytest.approx(0.22)
    check_times(text, rtol=1e-9, atol=1e-12)


def test_brief_is_the_same(text: perflow.PAG) -> None:
    brief = perflow.read(BRIEF)
    assert brief.call_paths().tolist() == text.call_paths().tolist()
    assert brief.metrics.equals(text.metrics)


def test_dot_facts() -> None:
    assert detect_format(DOT) == "gprof2dot"
    pag = perflow.read(DOT, total_time=2.81)
    # gprof2dot drops setup (0.1%) and is_odd (0%): below its 0.5% node threshold
    assert "main/setup" not in set(pag.call_paths())
    for path, calls in CALLS:
        if "is_odd" not in path:
            assert value(pag, path, "visits") == (22 - 20 if path == "main/is_even" else calls), path
    # step: "90.00%\n(11.74%)"; edge step -> kernel "78.26%"
    assert value(pag, "main/solve/step", "time_inc") == pytest.approx(0.90 * 2.81)
    assert value(pag, "main/solve/step", "time_exc") == pytest.approx(0.1174 * 2.81)
    assert value(pag, "main/solve/step/kernel", "time_exc") == pytest.approx(0.7826 * 2.81)
    assert pag.attrs["time_unit_source"] == "given"
    shares = perflow.read(DOT)  # without total_time: shares of a 1-second run
    # time_inc is re-derived from the self times: 11.74 + 78.26 + 7.83 + 0.33 + 1.78 = 99.94% (setup was dropped)
    assert value(shares, "main", "time_inc") == pytest.approx(0.9994)
    assert shares.attrs["time_unit_source"].startswith("assumed")
    check_times(pag, rtol=1e-9, atol=1e-12)


def test_callgrind_dot_from_hatchet() -> None:
    pag = perflow.read(CALLGRIND)
    # "(below main)" [label="libc-2.17.so\n(below main)\n97.95%\n(0.00%)\n0×"] -> main [label="97.94%\n1×"]
    root = pag.vertex("(below main)")
    assert root.module == "libc-2.17.so"
    # main [label="cpi\nmain\n97.94%\n(53.77%)\n1×"]: its only caller is (below main), so all of it is there
    assert value(pag, "(below main)/main", "time_exc") == pytest.approx(0.5377)
    assert value(pag, "(below main)/main", "visits") == 1
    assert pag.vertex("(below main)/main").module == "cpi"
    # 105 functions; the context tree repeats functions called from several places
    assert pag.vertex_table["name"].nunique() == 105
    check_times(pag, consistent=False)


@pytest.mark.hatchet
def test_callgrind_dot_against_hatchet() -> None:
    ht = import_hatchet()
    gf = ht.GraphFrame.from_gprof_dot(str(CALLGRIND))
    pag = perflow.read(CALLGRIND)
    names = {n.frame["name"] for n in gf.graph.traverse()}
    assert names == set(pag.vertex_table["name"])


def test_pydot_fallback_agrees(tmp_path: Path) -> None:
    from perflow.readers import gprof2dot

    text = DOT.read_text()
    fast = gprof2dot._statements(text)
    assert fast is not None
    assert sorted(fast[0]) == sorted(gprof2dot._pydot_statements(DOT, text)[0])
    # a DOT re-written on one line (not gprof2dot's layout) goes through pydot and reads the same
    one = tmp_path / "one-line.dot"
    one.write_text(" ".join(ln.strip() for ln in text.splitlines()))
    a, b = perflow.read(DOT, format="gprof2dot"), perflow.read(one, format="gprof2dot")
    assert a.call_paths().tolist() == b.call_paths().tolist() and a.metrics.equals(b.metrics)


@pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("gprof")), reason="needs gcc and gprof (binutils)")
def test_live_gcc_pg(tmp_path: Path) -> None:
    exe = tmp_path / "cg"
    subprocess.run(
        ["gcc", "-O0", "-fno-inline", "-pg", "-DWORK=20", "-o", str(exe), str(DATA / "gprof" / "cg.c")], check=True
    )
    subprocess.run([str(exe)], cwd=tmp_path, check=True, capture_output=True, timeout=120)
    out = tmp_path / "prof.txt"
    out.write_bytes(
        subprocess.run(["gprof", str(exe), str(tmp_path / "gmon.out")], check=True, capture_output=True).stdout
    )
    pag = perflow.read(out)
    for path, calls in CALLS:
        assert value(pag, path, "visits") == calls, path
    assert value(pag, "main/setup/kernel", "visits") == 1
    if not shutil.which("gprof2dot") and not _has_module("gprof2dot"):
        pytest.skip("gprof2dot is not installed")
    dot = tmp_path / "prof.dot"
    cmd = [sys.executable, "-m", "gprof2dot", "-f", "prof", "-n", "0", "-e", "0", str(out), "-o", str(dot)]
    subprocess.run(cmd, check=True, capture_output=True)
    g = perflow.read(dot)
    assert value(g, "main/solve/step", "visits") == 1200 and value(g, "main/walk", "visits") == 50


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_errors(tmp_path: Path) -> None:
    f = tmp_path / "prof.txt"
    f.write_text("Flat profile:\n\nEach sample counts as 0.01 seconds.\n no time accumulated\n")
    with pytest.raises(FormatError, match=r"prof\.txt.*no flat-profile rows and no call-graph entries"):
        perflow.read(f)
    g = tmp_path / "cut.txt"  # an entry cut before its [index] line
    g.write_text(
        "\t\t     Call graph\n\nindex % time    self  children    called     name\n"
        "                0.33    2.20    1200/1200        solve [3]\n-----------\n"
    )
    with pytest.raises(FormatError, match=r"cut\.txt.*without exactly one \[index\] line"):
        perflow.read(g, format="gprof")
    with pytest.raises(ValueError, match="total_time"):
        perflow.read(DOT, total_time=0)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("  7.84      2.76", "  7.84      9.76", r"\(line 8\): cumulative seconds 9\.76 are not the running sum"),
        ("3/3           main [1]", "7/3           main [1]", r"\(line 64\): an arc of 7 calls out of 3 in all"),
        (
            "0.33    2.20    1200/1200        solve",
            "-0.33    2.20    1200/1200        solve",
            r"\(line 60\): cannot read",
        ),
        ("1/1           main [1]", "1/1           main [12]", r"main \[12\] has no entry of its own"),
        ("5/5           main [1]", "5/5           main [3]", r"\[3\] names main here but solve in its entry"),
    ],
    ids=["cumulative", "arc-calls", "negative", "no-entry", "wrong-name"],
)
def test_damaged_gprof_text_is_refused(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = TEXT.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    bad = tmp_path / "bad.txt"
    bad.write_text(text.replace(old, new), encoding="utf-8")
    with pytest.raises(FormatError, match=r"bad\.txt.*" + message):
        perflow.read(bad, format="gprof")


def test_damaged_dot_is_refused(tmp_path: Path) -> None:
    lines = DOT.read_text(encoding="utf-8").splitlines(keepends=True)
    lost = tmp_path / "lost.dot"  # the statement of node 4 (kernel) lost: its edges name an undefined node
    lost.write_text("".join(ln for ln in lines if not ln.lstrip().startswith("4 [")), encoding="utf-8")
    with pytest.raises(FormatError, match=r"lost\.dot: edge 2 -> 4 names node 4, which the file does not define"):
        perflow.read(lost, format="gprof2dot")
    big = tmp_path / "big.dot"  # a share above 100 %
    big.write_text("".join(lines).replace("step\\n90.00%", "step\\n9000.00%"), encoding="utf-8")
    with pytest.raises(FormatError, match=r"big\.dot: node 2: impossible shares of the run \(9000\.0% in total"):
        perflow.read(big, format="gprof2dot")
    own = tmp_path / "own.dot"  # more own time than in total
    own.write_text("".join(lines).replace("(78.65%)", "(98.65%)"), encoding="utf-8")
    with pytest.raises(FormatError, match=r"own\.dot: node 4: impossible shares .*98\.65% own"):
        perflow.read(own, format="gprof2dot")


@pytest.mark.parametrize("path", [TEXT, DOT], ids=["text", "dot"])
def test_fuzz(tmp_path: Path, path: Path) -> None:
    fmt = "gprof" if path == TEXT else "gprof2dot"
    out = fuzz_file(lambda p: perflow.read(p, format=fmt), path, tmp_path)
    assert out["pag"] + out["error"] == 32


@pytest.mark.parametrize("path", [TEXT, DOT], ids=["text", "dot"])
def test_cli_info(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert ("(gprof)" if path == TEXT else "(gprof2dot)") in out
    assert "metrics     time_inc, time_exc, visits" in out
    assert "main/solve/step/kernel" in out.splitlines()[7]  # the hottest vertex first
