"""Writes cannot be redirected after the check (issue 25): a folder swapped for a symbolic link during a flow.

The hole: ``WritePolicy.resolve`` checked the path with ``realpath()`` and the
write later followed the path, so swapping ``out/sub`` with a link to another
folder while a flow wrote files into ``sub/`` landed 8-14 files outside the
output folder in 4 of 4 trials. The policy now holds the output folder's
descriptor and every write walks down from it with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from pathlib import Path

import pytest

import perflow
from perflow.errors import WriteRefused
from perflow.flow.writes import output_path, write_policy

from . import helpers  # noqa: F401 -- registers the t_* test passes

N_FILES = 60
#: each step keeps writing for at least this long, so that the swapper thread runs during the flow however fast
#: the writes (or their refusals) are
MIN_SECONDS = 0.2


@perflow.pass_(name="t_write_many")
def write_many(n: int, folder: str = "sub") -> list[str]:
    """Write ``n`` small files into ``folder`` of the output folder (through the policy and the atomic writer)."""
    from perflow._atomic import write_text

    out = []
    t0 = time.monotonic()
    for i in itertools.count():
        if i >= n and time.monotonic() - t0 >= MIN_SECONDS:
            break
        try:
            p = output_path(f"{folder}/f{i:03d}.txt")  # checked (realpath) ...
            assert p is not None
            time.sleep(0.0002)  # ... then written: the window the swap used
            write_text(p, f"file {i}\n", fsync=False)
            out.append(str(p))
        except WriteRefused:
            out.append("refused")
    return out


def _swapper(out: Path, elsewhere: Path, stop: threading.Event, swaps: list[int]) -> None:
    """Park ``out/sub`` under a new name, put a link to ``elsewhere`` in its place for a moment, put it back."""
    sub = out / "sub"
    k = 0
    while not stop.is_set():
        k += 1
        park = out / f"sub.parked{k}"
        try:
            os.rename(sub, park)
        except OSError:
            time.sleep(0.0002)
            continue
        try:
            os.symlink(elsewhere, sub)
            swaps[0] += 1
            time.sleep(0.0005)
            os.unlink(sub)
        except OSError:
            pass  # a write made a new sub meanwhile (inside the output folder): leave the parked one
        try:
            os.rename(park, sub)
        except OSError:
            pass
        time.sleep(0.0005)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("trial", range(2))
def test_symlink_swap_during_a_flow_lands_nothing_outside(tmp_path: Path, trial: int) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    f = perflow.Flow("many")
    n = f.input("n", int)
    for k in range(4):
        f.output(f"w{k}", f.step(f"w{k}", "t_write_many", n))
    stop, swaps = threading.Event(), [0]
    t = threading.Thread(target=_swapper, args=(out, elsewhere, stop, swaps))
    t.start()
    try:
        r = perflow.run(f, n=N_FILES, jobs=2, output_dir=out)
    finally:
        stop.set()
        t.join()
    assert swaps[0] >= 3, "the swapper did not run during the flow"
    assert list(elsewhere.iterdir()) == [], f"files landed outside the output folder: {list(elsewhere.iterdir())}"
    for k in range(4):  # a step either wrote its files inside or met the link and was refused (never followed it)
        if f"w{k}" in r.errors:
            assert isinstance(r.errors[f"w{k}"].error, WriteRefused), r.errors[f"w{k}"]
            continue
        for p in r[f"w{k}"]:
            assert p == "refused" or Path(p).resolve().is_relative_to(out.resolve())


def test_a_link_in_place_of_a_folder_is_refused_not_followed(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    from perflow._atomic import write_text

    with write_policy(out):
        p = output_path("sub/x.txt")  # checked while sub is a folder
        (out / "sub").rmdir()
        (out / "sub").symlink_to(elsewhere)  # then swapped
        with pytest.raises(WriteRefused, match=r"sub is no longer a folder"):
            write_text(p, "x")
    assert list(elsewhere.iterdir()) == []
    # outside a flow run nothing is confined: the caller's own path is followed
    write_text(out / "sub" / "y.txt", "y")
    assert (elsewhere / "y.txt").read_text() == "y"
