"""Saved PAGs checked on load (issue 25): hand-edited tables are a FormatError naming the table and the row.

Before, a parent cycle, an out-of-range parent, a wrong depth, intervals or
messages pointing at missing vertices, and leave < enter all loaded, then
failed inside analyses with TypeError/IndexError (exit 1).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

import perflow
from perflow.cli.main import main
from perflow.errors import FormatError


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("saved") / "run.pag"
    perflow.synthetic.trace(nprocs=2, iterations=2, seed=1).save(d)
    return d


def _damaged(saved: Path, tmp: Path, table: str, edit: Callable[[pd.DataFrame], None]) -> Path:
    d = tmp / "run.pag"
    shutil.copytree(saved, d)
    f = d / f"{table}.parquet"
    df = pd.read_parquet(f)
    edit(df)
    df.to_parquet(f)
    return d


def _set(col: str, row: int, value: object) -> Callable[[pd.DataFrame], None]:
    def edit(df: pd.DataFrame) -> None:
        df.loc[row, col] = value

    return edit


def _cycle(df: pd.DataFrame) -> None:
    child = int(df.index[df["parent"] > 0][0])
    df.loc[int(df.loc[child, "parent"]), "parent"] = child  # the parent's parent is its child


def _swap_times(df: pd.DataFrame) -> None:
    df.loc[3, ["enter", "leave"]] = [df.loc[3, "leave"], df.loc[3, "enter"]]


CASES = [
    ("vertices", _cycle, r"vertices.parquet: row \d+: the parents form a cycle"),
    ("vertices", _set("parent", 2, 999), r"vertices.parquet: row 2: parent 999 is not a vertex"),
    ("vertices", _set("parent", 3, 3), r"vertices.parquet: row 3: the vertex is its own parent"),
    ("vertices", _set("depth", 4, 7), r"vertices.parquet: row 4: depth 7, but the vertex has \d+ ancestors"),
    ("metrics", _set("vertex", 5, 10_000), r"metrics.parquet.*vertex"),
    ("intervals", _set("vertex", 1, 500), r"intervals.parquet: row 1: vertex 500 is not a vertex"),
    ("intervals", _set("parent", 6, 100_000), r"intervals.parquet: row 6: parent 100000 is not an interval"),
    ("intervals", _set("process", 2, 9), r"intervals.parquet: row 2: \(process 9, thread 0\) is not a location"),
    ("intervals", _swap_times, r"intervals.parquet: row 3: leave .* is before enter"),
    ("messages", _set("send_interval", 0, 77_777), r"messages.parquet: row 0: send_interval 77777 is not an interval"),
    ("messages", _set("bytes", 1, -5), r"messages.parquet: row 1: bytes -5 is negative"),
    ("collectives", _set("interval", 0, 99_999), r"collectives.parquet: row 0: interval 99999 is not an interval"),
]


@pytest.mark.parametrize(("table", "edit", "match"), CASES, ids=[f"{t}-{m[:30]}" for t, _, m in CASES])
def test_damaged_table_is_refused(saved: Path, tmp_path: Path, table: str, edit, match: str) -> None:  # type: ignore[no-untyped-def]
    d = _damaged(saved, tmp_path, table, edit)
    with pytest.raises(FormatError, match=match):
        perflow.load(d)


def test_cli_names_table_and_row(saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _damaged(saved, tmp_path, "vertices", _cycle)
    assert main(["info", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vertices.parquet: row" in err[0] and "cycle" in err[0], err


@pytest.mark.timeout(30)
def test_a_fifo_member_is_refused_not_read(saved: Path, tmp_path: Path) -> None:
    d = tmp_path / "run.pag"
    shutil.copytree(saved, d)
    (d / "metrics.parquet").unlink()
    os.mkfifo(d / "metrics.parquet")
    # perflow.load itself (not only perflow.read, which scans the folder first) must not block on the FIFO
    done: list[BaseException] = []
    t = threading.Thread(target=lambda: _catch(done, lambda: perflow.load(d)), daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "perflow.load blocked on a FIFO member"
    assert done and isinstance(done[0], FormatError) and "not a regular file" in str(done[0]), done
    with pytest.raises(FormatError, match="metrics.parquet: is a FIFO"):
        perflow.read(d)


def _catch(out: list[BaseException], fn: Callable[[], object]) -> None:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001
        out.append(exc)


def test_pristine_loads(saved: Path) -> None:
    pag = perflow.load(saved)
    assert pag.trace is not None and pag.n_vertices > 5
