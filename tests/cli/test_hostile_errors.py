"""Clear errors everywhere (issue 25): exit 2 and one line for what a user causes; names escaped on the terminal.

Reproducers: FIFO, /dev/zero and symlink-loop inputs (forced format or not),
``--format hatchet DIR`` / ``--format tau FILE``, SQLite names with ``%`` and
``#``, a 100,001-digit YAML integer, a full disk while writing the outputs
(the previous outputs kept as a set), a damaged cache entry (recomputed), and
vertex names holding CR, ESC sequences, NUL and U+202E.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

import perflow
from perflow.cli.main import main
from tests.conftest import REPO

NSYS = REPO / "tests" / "data" / "nsys" / "saxpy-mpi-cuda.sqlite"


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("perflow: error:")]
    assert len(err) == 1, err
    assert "Traceback" not in err[0] and "np.float64" not in err[0]
    return err[0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("forced", [None, "chrome", "pag"])
def test_fifo_devices_and_link_loops(tmp_path: Path, capsys: pytest.CaptureFixture[str], forced: str | None) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    opt = ["--format", forced] if forced else []
    for path, needle in ((fifo, "is a FIFO"), (Path("/dev/zero"), "is a character device"), (tmp_path / "a", "loop")):
        assert main(["info", *opt, str(path)]) == 2
        assert needle in _one_line_error(capsys)
    folder = tmp_path / "run.pag"
    folder.mkdir()
    os.mkfifo(folder / "manifest.json")
    assert main(["info", *opt, str(folder)]) == 2
    assert "is a FIFO" in _one_line_error(capsys)


def test_wrong_kind_of_path_for_a_forced_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--format", "hatchet", str(tmp_path)]) == 2
    assert "is a folder: the hatchet reader reads a file" in _one_line_error(capsys)
    f = tmp_path / "x.json"
    f.write_text("{}")
    assert main(["info", "--format", "tau", str(f)]) == 2
    _one_line_error(capsys)


@pytest.mark.parametrize("name", ["report%41.sqlite", "run#3.sqlite", "a?b.sqlite"])
def test_sqlite_names_are_quoted(tmp_path: Path, name: str) -> None:
    f = tmp_path / name
    shutil.copyfile(NSYS, f)
    decoy = tmp_path / "reportA.sqlite"  # what an unquoted %41 would open instead
    shutil.copyfile(REPO / "tests" / "data" / "nsys" / "cloverleaf-cuda.sqlite", decoy)
    before = sorted(p.name for p in tmp_path.iterdir())
    pag = perflow.read(f, format="nsys")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no file 'run' left behind
    assert pag.trace.span == perflow.read(NSYS, format="nsys").trace.span


def _flow(tmp_path: Path) -> Path:
    f = tmp_path / "flow.yaml"
    f.write_text(
        "perflow: 1\nname: three\ninputs: {pag: {type: PAG}}\nsteps:\n"
        "  a: {pass: hotspot, inputs: {data: input:pag}, settings: {k: 3}}\n"
        "  b: {pass: hotspot, inputs: {data: input:pag}, settings: {k: 5}}\n"
        "  c: {pass: hotspot, inputs: {data: input:pag}, settings: {k: 8}}\n"
        "outputs: {a: a, b: b, c: c}\n"
    )
    return f


def test_full_disk_keeps_the_previous_outputs_as_a_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pag = perflow.synthetic.trace(nprocs=2, iterations=2, seed=1)
    out = tmp_path / "out"
    flow = perflow.load_flow(_flow(tmp_path))
    perflow.run(flow, pag=pag).save(out, index=False)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert len(before) == 3
    import perflow._atomic as atomic

    real, calls = os.fsync, [0]

    def full_disk(fd: int) -> None:  # the disk fills while the third output is flushed
        calls[0] += 1
        if calls[0] == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    result = perflow.run(flow, pag=pag, settings={"a.k": 4, "b.k": 6, "c.k": 2})
    monkeypatch.setattr(atomic.os, "fsync", full_disk)
    with pytest.raises(OSError) as ei:
        result.save(out, index=False)
    assert ei.value.errno == errno.ENOSPC and str(out) in str(ei.value.filename)  # names the file being written
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # not one output replaced, no temporary left
    from perflow.cli.main import _one_line, _usage_error

    line = _one_line(ei.value)
    assert _usage_error(ei.value) and line.startswith(f"{ei.value.filename}: No space left on device"), line
    assert "previous outputs are kept" in line


def test_damaged_cache_entry_is_recomputed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    inp = tmp_path / "in.pag"
    perflow.synthetic.trace(nprocs=2, iterations=2, seed=1).save(inp)
    args = ["run", "hotspot", "-i", str(inp), "--cache", str(tmp_path / "cache"), "-q", "-o", str(tmp_path / "o")]
    assert main(args) == 0
    entries = sorted((tmp_path / "cache").rglob("0.pkl"))
    assert entries
    entries[0].write_bytes(b"damaged")
    metas = sorted((tmp_path / "cache").rglob("meta.json"))
    metas[-1].unlink()
    os.mkfifo(metas[-1])  # would block a read
    caplog.clear()
    assert main(args) == 0
    assert sum("recomputing" in r.getMessage() for r in caplog.records) >= 2, caplog.text


def test_big_yaml_integer_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "f.yaml"
    f.write_text("perflow: 1\nname: x\ninputs: {pag: {type: PAG}}\nsteps:\n  t: {pass: hotspot, inputs: {data: input:pag}, settings: {k: "
                 + "9" * 100_001 + "}}\n")  # fmt: skip
    assert main(["validate", str(f)]) == 2
    cap = capsys.readouterr()
    assert "integer of 100001 digits" in cap.out + cap.err


def test_terminal_escapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evil = ["ok\rFAKE", "title\x1b]0;pwned\x07", "nul\x00byte", "bidi\u202egnp.exe", "esc\x1b[2Jclear"]
    ev = [{"ph": "X", "name": "main", "pid": 1, "tid": 1, "ts": 0, "dur": 1000}]
    ev += [{"ph": "X", "name": n, "pid": 1, "tid": 1, "ts": 10 + 100 * i, "dur": 50} for i, n in enumerate(evil)]
    f = tmp_path / "t.json"
    f.write_text(json.dumps(ev))
    assert main(["info", str(f)]) == 0
    out = capsys.readouterr().out
    for bad in ("\r", "\x1b", "\x00", "\u202e", "\x07"):
        assert bad not in out
    for shown in ("ok\\x0dFAKE", "title\\x1b]0;pwned\\x07", "nul\\x00byte", "bidi\\u202egnp.exe"):
        assert shown in out, out
    from perflow.cli._term import printable

    assert printable("a\tb\nc\x9bd") == "a\tb\nc\\x9bd"
