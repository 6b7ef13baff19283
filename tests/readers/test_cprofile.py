"""cProfile/pstats reader on the shared recursive sample and generated profiles."""

from __future__ import annotations

import cProfile
from pathlib import Path

import pytest

import perflow
from perflow.errors import FormatError
from tests.conftest import shared
from tests.readers.helpers import check_times, value


@pytest.fixture(scope="module")
def cycle() -> perflow.PAG:
    return perflow.read(shared("cprofile", "cprofile-cycle.pstats"))


def test_shape(cycle: perflow.PAG) -> None:
    assert cycle.attrs["format"] == "cprofile"
    names = set(cycle.vertex_table["name"].astype(str))
    assert len(names) == 9  # README: 9 functions
    # 'recursive' is called from f and from g: two contexts, so 10 vertices
    assert cycle.n_vertices == 10
    assert sorted(p for p in cycle.call_paths() if p.endswith("recursive")) == ["e/f/g/recursive", "e/f/recursive"]


def test_hand_checked(cycle: perflow.PAG) -> None:
    # stats[('pstats_reader_test.py', 17, 'e')] = (1, 1, 0.000267, 23.0226, {}): a root
    assert value(cycle, "e", "time_inc") == pytest.approx(23.0226)
    assert value(cycle, "e", "time_exc") == pytest.approx(0.000267)
    # the edge f -> g is (nc=1000, cc=1000, tt=0.257098, ct=22.950701); f has one context (share 1)
    assert value(cycle, "e/f/g", "time_inc") == pytest.approx(22.950701)
    assert value(cycle, "e/f/g", "time_exc") == pytest.approx(0.257098)
    assert value(cycle, "e/f/g", "visits") == 1000
    assert cycle.vertex("e/f/g").file == "pstats_reader_test.py"
    assert cycle.vertex("e/f/g").line == 12
    # the cycle recursive -> recursive is folded: total exclusive time is kept
    assert cycle.aggregate("time_exc").sum() == pytest.approx(23.0226 + 0.000073, rel=1e-5)


def test_inclusive_ge_exclusive(cycle: perflow.PAG) -> None:
    check_times(cycle, consistent=False)


def test_python2_file() -> None:
    # written by Python 2's cProfile (byte-string file names; marshal's Python 2 string table): the same program
    pag = perflow.read(shared("cprofile", "cprofile-cycle-py2.pstats"))
    assert len(set(pag.vertex_table["name"].astype(str))) == 9
    # stats[(..., 17, 'e')] = (1, 1, 0.000279, 2.359559, {}): a root
    assert value(pag, "e", "time_inc") == pytest.approx(2.359559)
    assert value(pag, "e", "time_exc") == pytest.approx(0.000279)
    assert value(pag, "e/f", "visits") == 1000
    assert pag.vertex("e/f").file == "pstats_reader_test.py"  # a byte string in the file


def _work(n: int) -> int:
    return n if n < 2 else _work(n - 1) + _work(n - 2)


def test_per_rank_files_and_mutual_recursion(tmp_path: Path) -> None:
    for r in (0, 1):
        pr = cProfile.Profile()
        pr.enable()
        _work(12 + r)
        pr.disable()
        pr.dump_stats(tmp_path / f"rank{r}.pstats")
    pag = perflow.read(tmp_path)
    assert pag.attrs["format"] == "cprofile"
    assert list(pag.processes) == [0, 1]
    w = [p for p in pag.call_paths() if p.endswith("_work")]
    assert len(w) == 1  # recursion folded into one vertex
    vid = pag.vertex(w[0]).id
    # fib-style recursion: _work(n) makes 2*fib(n+1)-1 calls
    assert pag.metrics.loc[(vid, 0, 0), "visits"] == 2 * 233 - 1
    assert pag.metrics.loc[(vid, 1, 0), "visits"] == 2 * 377 - 1
    check_times(pag, consistent=False)
    from perflow.readers import cprofile as reader

    one = reader.read(str(tmp_path / "rank*.pstats"))
    assert one.n_vertices == pag.n_vertices


def test_errors(tmp_path: Path) -> None:
    f = tmp_path / "x.pstats"
    f.write_bytes(b"")
    with pytest.raises(FormatError, match="empty file"):
        perflow.read_cprofile(f)
    f.write_bytes(b"{)\x03garbage")
    with pytest.raises(FormatError, match=r"x\.pstats \(byte \d+\): damaged marshal data"):
        perflow.read_cprofile(f)
    import marshal

    f.write_bytes(marshal.dumps([1, 2]))
    with pytest.raises(FormatError, match="holds a list"):
        perflow.read_cprofile(f)


def _mesh(path: Path, n: int) -> list[tuple[str, int, str]]:
    """A pstats file where each of ``n`` functions calls every other one (one shared edge tuple)."""
    import marshal

    funcs = [("m.py", 10 + i, f"f{i}") for i in range(n)]
    edge = (2, 2, 1e-4, 1e-3)
    stats = {
        g: (2 * (n - 1), 2 * (n - 1), 0.01, 1.0 + j, {f: edge for f in funcs if f != g}) for j, g in enumerate(funcs)
    }
    path.write_bytes(marshal.dumps(stats))
    return funcs


def test_full_mesh_expands_every_path_without_repeats(tmp_path: Path) -> None:
    _mesh(tmp_path / "m.pstats", 5)
    pag = perflow.read(tmp_path / "m.pstats", format="cprofile")
    # nobody is a root: the function with the most inclusive time (f4) starts one; paths never repeat a
    # function: 1 + 4 + 4*3 + 4*3*2 + 4*3*2*1 vertices
    assert pag.n_vertices == 1 + 4 + 12 + 24 + 24
    assert value(pag, "f4", "time_inc") == pytest.approx(5.0)
    assert value(pag, "f4/f0", "time_inc") == pytest.approx(1e-3)  # depth 1: the edge's own numbers
    assert value(pag, "f4/f0", "visits") == pytest.approx(2, rel=1e-5)  # plus deeper calls back to f0, folded
    check_times(pag, consistent=False)


def test_full_mesh_truncated_walk_ends_at_the_budget(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # 1,200 functions (1.44 million edges) took minutes: every vertex past the budget still walked its callees
    _mesh(tmp_path / "m.pstats", 60)
    with caplog.at_level("WARNING", logger="perflow"):
        pag = perflow.read_cprofile(tmp_path / "m.pstats", max_vertices=500)
    assert pag.n_vertices == 501  # the root and max_vertices below it
    assert "truncated at 500 vertices" in caplog.text
    assert value(pag, "f59", "time_inc") == pytest.approx(60.0)
    check_times(pag, consistent=False)
