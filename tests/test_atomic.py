"""Atomic outputs: a killed run leaves the previous files intact; concurrent saves to one path all succeed.

The holes (issue 18): ``--output`` files were written in place (killing a
run destroyed the previous CSV and left a truncated one that looked valid);
killed PAG saves left ``.tmp-*`` folders behind; concurrent saves to one path
failed now and then.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow import PAG, _atomic
from perflow._atomic import atomic_dir, atomic_path, clean_stale, temp_sibling, write_text
from perflow.flow.outputs import write_value

ROOT = Path(__file__).resolve().parents[1]


def _child(code: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _temporaries(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


# ---------------------------------------------------------------------- files
def test_write_replaces_and_never_writes_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "out.md"
    write_text(target, "one")
    write_text(target, "two")
    assert target.read_text() == "two"
    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "link.md"
    link.symlink_to(victim)
    write_text(link, "new")
    assert victim.read_text() == "keep" and not link.is_symlink() and link.read_text() == "new"
    assert _temporaries(tmp_path) == []


def test_a_failing_writer_leaves_the_previous_file(tmp_path: Path) -> None:
    target = tmp_path / "t.csv"
    target.write_text("previous\n")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        assert tmp.suffix == ".csv" and tmp.parent == tmp_path  # writers choosing a format by suffix work
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "previous\n" and _temporaries(tmp_path) == []


def test_only_stale_temporaries_of_the_target_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "t.csv"
    dead, alive = _dead_pid(), os.getppid()
    host = _atomic.temps.HOST
    names = {
        f".t.csv.tmp-{host}-{dead}-0123abcd.csv": False,  # our host, dead writer: removed
        f".t.csv.old-{host}-{dead}-0123abce": False,
        f".t.csv.tmp-{host}-{alive}-0123abcf.csv": True,  # a live writer: kept
        f".t.csv.tmp-{host}-{os.getpid()}-0123abd0.csv": True,  # this process (another thread): kept
        f".t.csv.tmp-otherhost-{dead}-0123abd1.csv": True,  # another host, recent: kept
        f".u.csv.tmp-{host}-{dead}-0123abd2.csv": True,  # another target's: kept
        "t.csv.tmp-x": True,  # not our naming: kept
    }
    for n in names:
        (tmp_path / n).write_text("x")
    old = tmp_path / f".t.csv.tmp-otherhost-{dead}-0123abd3"
    old.mkdir()
    (old / "f").write_text("x")
    os.utime(old, (time.time() - 3 * 86400,) * 2)  # another host, three days old: removed
    names[old.name] = False
    link = tmp_path / f".t.csv.tmp-{host}-{dead}-0123abd4.csv"
    link.symlink_to(tmp_path / "t.csv.tmp-x")  # a link is never ours: kept
    names[link.name] = True
    assert clean_stale(target) == 3
    assert {p.name for p in tmp_path.iterdir()} == {n for n, kept in names.items() if kept}


def test_a_killed_csv_write_leaves_the_previous_csv(tmp_path: Path) -> None:
    write_value(pd.DataFrame({"a": [1, 2], "b": [0.5, 0.25]}), tmp_path, "table")
    before = (tmp_path / "table.csv").read_bytes()
    code = (
        "import sys, numpy as np, pandas as pd\n"
        "from perflow.flow.outputs import write_value\n"
        "n = 8_000_000\n"
        "write_value(pd.DataFrame({'a': np.arange(n), 'b': np.arange(n) * 0.5}), sys.argv[1], 'table')\n"
    )
    child = _child(code, str(tmp_path))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # kill it once the new CSV is well under way
            tmp = [p for p in tmp_path.iterdir() if p.name.startswith(".table.csv.tmp-")]
            if tmp and tmp[0].stat().st_size > 1 << 20:
                break
            assert child.poll() is None, child.communicate()
            time.sleep(0.01)
        else:
            pytest.fail("the writer never got going")
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    assert (tmp_path / "table.csv").read_bytes() == before  # not truncated, not half new
    assert len(_temporaries(tmp_path)) == 1  # the killed writer's, named as ours
    write_value(pd.DataFrame({"a": [3]}), tmp_path, "table")  # the next write removes it
    assert _temporaries(tmp_path) == [] and (tmp_path / "table.csv").read_text() == "a\n3\n"


# ---------------------------------------------------------------------- folders and saved PAGs
def _literal(v: float) -> PAG:
    return PAG.from_literal({"name": "main", "metrics": {"time_exc": [v, v]}, "children": [{"name": "f"}]})


def test_a_killed_save_leaves_the_previous_pag_and_its_temporary_is_cleaned(tmp_path: Path) -> None:
    path = _literal(1.0).save(tmp_path / "x.pag")
    code = (
        "import sys, time\n"
        "from perflow import PAG\n"
        "from perflow.pag import persist\n"
        "real = persist._write_parquet\n"
        "def slow(df, p):\n"
        "    real(df, p)\n"
        "    print('wrote', p.name, flush=True)\n"
        "    time.sleep(60)\n"
        "persist._write_parquet = slow\n"
        "PAG.from_literal({'name': 'main', 'metrics': {'time_exc': [2.0]}}).save(sys.argv[1])\n"
    )
    child = _child(code, str(path))
    try:
        line = child.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("wrote"), child.communicate()
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    assert perflow.load(path).metrics["time_exc"].tolist() == [1.0, 1.0]
    (left,) = _temporaries(tmp_path)
    assert left.startswith(".x.pag.tmp-")
    _literal(3.0).save(path)
    assert _temporaries(tmp_path) == [] and perflow.load(path).metrics["time_exc"].tolist() == [3.0, 3.0]


def test_concurrent_saves_in_threads_all_succeed(tmp_path: Path) -> None:
    path = tmp_path / "shared.pag"
    pags = [_literal(float(i)) for i in range(6)]
    errors: list[BaseException] = []
    loads: list[float] = []

    def saver(pag: PAG) -> None:
        try:
            for _ in range(20):
                pag.save(path)
                loads.append(perflow.load(path).metrics["time_exc"].iloc[0])
        except BaseException as exc:  # noqa: BLE001 -- collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=saver, args=(p,)) for p in pags]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(loads) == 120 and set(loads) <= set(range(6))
    assert perflow.load(path).metrics["time_exc"].iloc[0] in range(6)
    assert _temporaries(tmp_path) == []


def test_concurrent_saves_in_processes_all_succeed(tmp_path: Path) -> None:
    path = tmp_path / "shared.pag"
    code = (
        "import sys\n"
        "from perflow import PAG, load\n"
        "v = float(sys.argv[2])\n"
        "pag = PAG.from_literal({'name': 'main', 'metrics': {'time_exc': [v, v, v]}})\n"
        "for _ in range(15):\n"
        "    pag.save(sys.argv[1])\n"
        "    assert load(sys.argv[1]).metrics['time_exc'].iloc[0] in range(4)\n"
    )
    children = [_child(code, str(path), str(i)) for i in range(4)]
    results = [c.communicate(timeout=300) + (c.returncode,) for c in children]
    assert [r[2] for r in results] == [0, 0, 0, 0], results
    back = perflow.load(path)
    assert back.metrics["time_exc"].nunique() == 1 and back.metrics["time_exc"].iloc[0] in range(4)
    assert _temporaries(tmp_path) == []


def test_folders_without_renameat2_use_two_renames(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    monkeypatch.setattr(_atomic, "_exchange", lambda a, b: errno.ENOSYS)
    path = tmp_path / "x.pag"
    for v in (1.0, 2.0):
        _literal(v).save(path)
    assert perflow.load(path).metrics["time_exc"].tolist() == [2.0, 2.0]
    errors: list[BaseException] = []

    def saver(i: int) -> None:
        try:
            for _ in range(5):
                with atomic_dir(tmp_path / "d") as tmp:
                    (tmp / "v").write_text(str(i))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=saver, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and (tmp_path / "d" / "v").read_text() in {"0", "1", "2", "3"}
    assert _temporaries(tmp_path) == []


def test_temp_names_keep_the_suffix_and_are_unique(tmp_path: Path) -> None:
    a, b = temp_sibling(tmp_path / "fig.png"), temp_sibling(tmp_path / "fig.png")
    assert a != b and a.suffix == ".png" and a.name.startswith(".fig.png.tmp-")
    assert temp_sibling(tmp_path / "x.pag", suffix=False).suffix != ".pag"


def test_outputs_of_a_run_are_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kind of output goes through the atomic writer (a failure leaves the previous file)."""
    from perflow.passes.plot import plot_breakdown

    values = {
        "table": pd.DataFrame({"a": [1]}),
        "text": "# Report\nbody",
        "data": {"k": np.int64(3)},
        "fig": plot_breakdown(pd.DataFrame({"process": [0], "computation": [1.0]})),
    }
    paths = {n: write_value(v, tmp_path, n) for n, v in values.items()}
    before = {n: p.read_bytes() for n, p in paths.items()}

    def broken(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    for n, v in values.items():
        with pytest.raises(OSError, match="disk full"):
            write_value(v, tmp_path, n)
    monkeypatch.undo()
    assert {n: p.read_bytes() for n, p in paths.items()} == before
    assert _temporaries(tmp_path) == []


def test_a_page_written_in_the_same_set_reads_the_files_before_it(tmp_path):
    """Under all_or_nothing the page embeds the PNG already rendered and links the CSV (both still temporaries)."""
    import base64

    from matplotlib.figure import Figure

    from perflow._atomic import all_or_nothing, current_file
    from perflow.flow.outputs import write_index

    fig = Figure(figsize=(2, 1))
    fig.add_subplot().plot([0, 1], [1, 0])
    table = pd.DataFrame({"v": range(100)})
    assert current_file(tmp_path / "fig.png") is None
    with all_or_nothing():
        write_value(fig, tmp_path, "fig")
        write_value(table, tmp_path, "big")
        pending = current_file(tmp_path / "fig.png")
        assert pending is not None and pending.is_file() and not (tmp_path / "fig.png").exists()
        write_index({"fig": fig, "big": table}, tmp_path)
    assert current_file(tmp_path / "fig.png") == tmp_path / "fig.png"
    page = (tmp_path / "index.html").read_text()
    assert base64.b64encode((tmp_path / "fig.png").read_bytes()).decode() in page  # drawn once, for the file
    assert '<a href="big.csv">big.csv</a>' in page
