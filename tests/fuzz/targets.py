"""The fuzz table: one :class:`~tests.fuzz.harness.Target` per reader and sample kind.

Samples come from the shared real data (``../shared/data``), the Chrome
samples under ``tests/data/chrome``, or are generated (cProfile, a gzip
Chrome trace, a ``perflow record`` folder). :func:`targets` lists the rows
whose sample is available here.
"""

from __future__ import annotations

import cProfile
import gzip
import os
import shutil
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from tests.conftest import REPO, shared_data_dir

from . import mutators as M
from .harness import Sample, Target

_TEXT = (".json", ".cali", ".xml", ".pfw")


def _copy(src: Path, dst: Path) -> Path:
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    for p in [dst, *dst.rglob("*")] if dst.is_dir() else [dst]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return dst


def _files(p: Path) -> list[Path]:
    return sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]


def _from(src: Path | None, *, only: Callable[[Path], bool] = lambda f: True, text: bool | None = None):  # type: ignore[no-untyped-def]
    """A builder copying ``src`` (a file or directory) into the case's root."""

    def build(root: Path) -> Sample:
        assert src is not None
        dst = _copy(src, root / src.name)
        files = [f for f in _files(dst) if only(f)]
        is_text = {f for f in files if (f.suffix in _TEXT if text is None else text)}
        return Sample(root, dst, files, frozenset(is_text))

    return build


def _work(n: int) -> int:
    return n if n < 2 else _work(n - 1) + _work(n - 2)


def _helper(k: int) -> int:
    return sum(_work(i) for i in range(k))


@lru_cache(maxsize=1)
def _pstats_bytes() -> bytes:
    import tempfile

    pr = cProfile.Profile()
    pr.enable()
    _helper(12)
    sorted(str(i) for i in range(200))
    pr.disable()
    with tempfile.TemporaryDirectory() as d:
        pr.dump_stats(Path(d) / "x.pstats")
        return (Path(d) / "x.pstats").read_bytes()


def _build_pstats(root: Path) -> Sample:
    f = root / "rank0.pstats"
    f.write_bytes(_pstats_bytes())
    return Sample(root, f, [f])


def _build_chrome_gz(root: Path) -> Sample:
    f = root / "viztracer.json.gz"
    f.write_bytes(gzip.compress((REPO / "tests/data/chrome/viztracer.json").read_bytes(), mtime=0))
    return Sample(root, f, [f])


@lru_cache(maxsize=1)
def _raw_npz() -> bytes:
    import tempfile

    from perflow.synthetic import raw_trace
    from perflow.trace.store import save_raw

    with tempfile.TemporaryDirectory() as d:
        save_raw(raw_trace(nprocs=2, iterations=3), Path(d) / "rawtrace.npz")
        return (Path(d) / "rawtrace.npz").read_bytes()


def _build_recording(root: Path) -> Sample:
    d = root / "rec"
    (d / "raw").mkdir(parents=True)
    f = d / "rawtrace.npz"
    f.write_bytes(_raw_npz())
    return Sample(root, d, [f])


@lru_cache(maxsize=1)
def _saved_pag_files() -> dict[str, bytes]:
    import tempfile

    from perflow.pag.persist import save
    from perflow.synthetic import profile

    with tempfile.TemporaryDirectory() as d:
        out = save(profile(nvertices=60, nprocs=4, seed=3), Path(d) / "pag")
        return {f.name: f.read_bytes() for f in sorted(out.iterdir()) if f.is_file()}


def _build_saved_pag(root: Path) -> Sample:
    d = root / "pag"
    d.mkdir()
    for name, data in _saved_pag_files().items():
        (d / name).write_bytes(data)
    return Sample(root, d, sorted(d.iterdir()), finite_values=False)


def _build_projections(root: Path) -> Sample:
    """The pingpong Projections logs, inflated to plain text so that text mutators reach the records."""
    d = root / "pingpong"
    d.mkdir()
    for f in sorted((REPO / "tests" / "data" / "projections" / "pingpong").iterdir()):
        if f.suffix == ".gz":
            (d / f.stem).write_bytes(gzip.decompress(f.read_bytes()))
        else:
            shutil.copyfile(f, d / f.name)
    files = [f for f in sorted(d.iterdir()) if f.suffix in (".sts", ".log")]
    return Sample(root, d, files, frozenset(files))


def targets() -> list[Target]:
    """The rows of the fuzz table whose samples exist here."""
    data = shared_data_dir()
    chrome = REPO / "tests" / "data" / "chrome"
    local = REPO / "tests" / "data"

    def sd(*parts: str) -> Path | None:
        p = data.joinpath(*parts) if data else None
        return p if p is not None and p.exists() else None

    G, T = M.GENERIC_BINARY, M.GENERIC_TEXT
    rows: list[tuple[Path | None, Target]] = [
        (
            Path("."),
            Target(
                "cprofile",
                "cprofile",
                _build_pstats,
                [*G, M.marshal_count, M.marshal_values, M.marshal_values, M.marshal_values],
            ),
        ),
        (
            sd("cprofile", "cprofile-cycle.pstats"),
            Target(
                "cprofile-shared", "cprofile", _from(sd("cprofile", "cprofile-cycle.pstats")), [*G, M.marshal_count]
            ),
        ),
        (
            chrome,
            Target(
                "chrome", "chrome", _from(chrome / "viztracer.json"), [*T, M.json_deep, M.json_values, M.json_values]
            ),
        ),
        (
            chrome,
            Target("chrome-pytorch", "chrome", _from(chrome / "pytorch.json"), [*T, M.json_values, M.json_values]),
        ),
        (chrome, Target("chrome-pfw", "chrome", _from(chrome / "perfflow.pfw"), [*T, M.json_deep])),
        (chrome, Target("chrome-ranks", "chrome", _from(chrome / "per-rank"), [*T, M.json_values])),
        (chrome, Target("chrome-gz", "chrome", _build_chrome_gz, [*G, M.gzip_file_bomb, M.gzip_file_bomb])),
        (
            sd("caliper", "lulesh-cali"),
            Target(
                "caliper-cali",
                "caliper",
                _from(sd("caliper", "lulesh-cali", "lulesh-annotation-profile.cali")),
                [*T, M.cali_cycle, M.cali_self_parent, M.cali_truncate_record],
            ),
        ),
        (
            sd("caliper", "cpi-json"),
            Target(
                "caliper-json",
                "caliper",
                _from(sd("caliper", "cpi-json", "cpi-callpath-profile.json")),
                [*T, M.json_values, M.json_values, M.json_deep, M.caljson_cycle, M.caljson_bad_parent],
            ),
        ),
        (
            sd("tau", "cpi-mpi"),
            Target("tau", "tau", _from(sd("tau", "cpi-mpi"), text=True), [*T, M.tau_extra_timer]),
        ),
        (
            sd("hpctoolkit", "cpi-xml"),
            Target(
                "hpctoolkit-classic",
                "hpctoolkit",
                _from(sd("hpctoolkit", "cpi-xml")),
                [*G, M.dup_lines, M.metricdb_extra, M.xml_deep],
            ),
        ),
        (
            sd("hpctoolkit", "ping-pong-v4"),
            Target(
                "hpctoolkit-v4",
                "hpctoolkit",
                _from(sd("hpctoolkit", "ping-pong-v4"), only=lambda f: f.suffix == ".db"),
                [*G, M.v4_ctx_cycle],
            ),
        ),
        (
            sd("hpctoolkit", "ping-pong-v4"),
            Target(
                "hpctoolkit-v4-profile",
                "hpctoolkit",
                _from(sd("hpctoolkit", "ping-pong-v4"), only=lambda f: f.name in ("meta.db", "profile.db")),
                [*G, M.v4_ctx_cycle],
                options={"mode": "profile"},
            ),
        ),
        (
            sd("cube", "scorep-cpi"),
            Target(
                "cube",
                "cube",
                _from(sd("cube", "scorep-cpi", "profile.cubex")),
                [
                    *(M.cube_member(m) for m in T),
                    M.cube_member(M.huge_count),
                    M.cube_zbomb,
                    M.cube_tar_bomb,
                    M.cube_dup_cnode,
                    M.truncate,
                ],
            ),
        ),
        (
            sd("otf2", "ping-pong"),
            Target(
                "otf2",
                "otf2",
                _from(sd("otf2", "ping-pong"), only=lambda f: f.suffix in (".otf2", ".def", ".evt")),
                G,
            ),
        ),
        (
            Path("."),
            Target(
                "recording",
                "recording",
                _build_recording,
                [*(M.npz_member(m) for m in G), M.npy_huge_shape, M.npz_bomb],
            ),
        ),
        (Path("."), Target("saved-pag", "pag", _build_saved_pag, [*G, M.json_values, M.json_deep])),
        # the readers added in round 2 (samples under tests/data, written by the tools themselves)
        *(
            (local / d, Target(name, fmt, _from(local / d / f), [*T, M.json_values, M.json_values, M.json_deep]))
            for name, fmt, d, f in (
                ("hatchet-literal", "hatchet", "hatchet", "hatchet-graph-literal.json"),
                ("pyinstrument", "pyinstrument", "pyinstrument", "work.pyinstrument.json"),
                ("timemory", "timemory", "timemory", "wall.tree.json"),
            )
        ),
        (local / "gprof", Target("gprof", "gprof", _from(local / "gprof" / "cg.gprof.txt", text=True), T)),
        (
            local / "gprof2dot",
            Target("gprof2dot", "gprof2dot", _from(local / "gprof2dot" / "cg.dot", text=True), T),
        ),
        (
            local / "nsys",
            Target(
                "nsys", "nsys", _from(local / "nsys" / "saxpy-mpi-cuda.sqlite"), [*G, M.sqlite_values, M.sqlite_values]
            ),
        ),
        (
            local / "rocprof",
            Target("rocprof", "rocprof", _from(local / "rocprof" / "v3-docs-two-streams", text=True), T),
        ),
        (
            local / "projections",
            Target("projections", "projections", _build_projections, T),
        ),
        (
            local / "projections",
            Target(
                "projections-gz",
                "projections",
                _from(local / "projections" / "pingpong", only=lambda f: f.suffix == ".gz", text=False),
                [*G, M.gzip_file_bomb],
            ),
        ),
    ]
    out = []
    for need, t in rows:
        if need is None:
            continue
        if t.name.startswith("otf2"):
            t.build = _otf2_build(t.build)
        out.append(t)
    return out


def _otf2_build(build: Callable[[Path], Sample]) -> Callable[[Path], Sample]:
    def b(root: Path) -> Sample:
        s = build(root)
        s.read_path = s.read_path / "traces.otf2"
        return s

    return b
