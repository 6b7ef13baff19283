"""Checks shared by the reader tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

import perflow


def check_times(pag: perflow.PAG, *, consistent: bool = True, rtol: float = 1e-6, atol: float = 1e-9) -> None:
    """inclusive >= exclusive on every row; with ``consistent``, inc = exc + children's inc per location."""
    m = pag.metrics
    inc = m["time_inc"].to_numpy()
    exc = m["time_exc"].to_numpy()
    assert np.all(inc >= exc - atol - rtol * np.abs(inc)), "time_inc < time_exc somewhere"
    if not consistent:
        return
    parent = pag.vertex_table["parent"].to_numpy()
    df = m[["time_inc"]].reset_index()
    df["parent"] = parent[df["vertex"].to_numpy()]
    child = df[df["parent"] >= 0].groupby(["parent", "process", "thread"])["time_inc"].sum()
    child.index = child.index.set_names(["vertex", "process", "thread"])
    kids = child.reindex(m.index, fill_value=0.0).to_numpy()
    np.testing.assert_allclose(inc, exc + kids, rtol=rtol, atol=atol)


def value(pag: perflow.PAG, path: str, metric: str, process: int = 0, thread: int = 0) -> float:
    """One metric cell addressed by call path."""
    v = pag.vertex(path).id
    return float(pag.metrics.loc[(v, process, thread), metric])


def paths(pag: perflow.PAG) -> pd.Series:
    return pag.call_paths()


def read_damaged(read, path, outcomes: dict[str, int], *, times: bool = False) -> None:
    """Read a damaged input: a PAG (counted in ``outcomes["pag"]``; with ``times`` its times checked) or a
    FormatError naming it (``outcomes["error"]``); anything else fails the calling test."""
    from perflow.errors import FormatError

    try:
        pag = read(path)
    except FormatError as exc:
        assert str(path) in str(exc), f"the error does not name the input: {exc}"
        outcomes["error"] += 1
    else:
        assert isinstance(pag, perflow.PAG)
        if times:
            check_times(pag, consistent=False)
        outcomes["pag"] += 1


def fuzz_file(read, src, tmp_path, *, truncations: int = 12, flips: int = 20, seed: int = 7) -> dict[str, int]:
    """Truncated copies and copies with flipped bytes of ``src``: each reads to a PAG or a FormatError naming it.

    Returns how many gave a PAG and how many an error (anything else -- another
    exception, a hang caught by the test timeout -- fails the calling test).
    """
    import random

    raw = src.read_bytes()
    rng = random.Random(seed)
    outcomes = {"pag": 0, "error": 0}

    def attempt(p) -> None:
        read_damaged(read, p, outcomes)

    for i in range(truncations):
        p = tmp_path / f"t{i}{src.suffix}"
        p.write_bytes(raw[: rng.randrange(0, len(raw))])
        attempt(p)
    for i in range(flips):
        data = bytearray(raw)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        p = tmp_path / f"f{i}{src.suffix}"
        p.write_bytes(bytes(data))
        attempt(p)
    return outcomes
