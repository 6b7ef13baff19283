"""Symbols: inline chains of optimised C++ as llvm-symbolizer gives them, Fortran names, call lines."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from perflow.recorder.symbols import clean_name

from .conftest import site_line


def _llvm_chain(exe: str, offsets: list[int]) -> dict[int, list[tuple[str, str, int]]]:
    """Frames (outermost first) of module offsets, from llvm-symbolizer run directly."""
    p = subprocess.run(
        ["llvm-symbolizer", f"--obj={exe}", "--inlining", "--demangle", "--output-style=JSON"],
        input="".join(f"0x{o:x}\n" for o in offsets),
        capture_output=True,
        text=True,
        check=True,
    )
    out = {}
    for line in p.stdout.splitlines():
        rec = json.loads(line)
        out[int(rec["Address"], 16)] = [
            (clean_name(s["FunctionName"], s["FileName"]), s["FileName"], int(s["Line"]))
            for s in reversed(rec["Symbol"])
        ]
    return out


def _maps(path: Path) -> list[tuple[int, int, int, str]]:
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            a, b = (int(x, 16) for x in parts[0].split("-"))
            rows.append((a, b, int(parts[2], 16), parts[5]))
    return rows


def _outside_chains(rows: list[tuple[int, int, int, str]], exe: str, addrs: list[int]) -> dict[int, int]:
    """Frames per address in a mapped module other than the program (inline chains of libc with debug info)."""
    per: dict[str, set[int]] = {}
    for a in set(addrs):
        hit = [f for x, y, _, f in rows if x <= a < y and f != exe]
        if hit:
            per.setdefault(hit[0], set()).add(a)
    out = {}
    for f, mine in per.items():
        base = min(x - off for x, y, off, g in rows if g == f)
        try:
            chains = _llvm_chain(f, sorted(a - base for a in mine))
        except (subprocess.CalledProcessError, OSError):
            continue
        out.update({a: max(1, len(chains.get(a - base, []))) for a in mine})
    return out


@pytest.mark.skipif(shutil.which("llvm-symbolizer") is None, reason="llvm-symbolizer not installed (Debian llvm)")
def test_every_sampled_frame_matches_llvm_symbolizer(recorded) -> None:  # noqa: ANN001
    """C++ at -O3 with inlining: each sample's stack is what llvm-symbolizer says its addresses are."""
    from perflow.recorder.decode import read_dir

    run = recorded("halo_slow.cpp", n=4, flags=("-O3",))
    raw = run.raw
    exe = raw.attrs["program"]
    procs = read_dir(run.result.outdir / "raw")
    names = raw.regions["name"].to_numpy()
    frames = raw.stacks.sort_values(["stack", "depth"]).groupby("stack")["region"].apply(list).to_dict()
    smp = raw.table("sample_events")
    checked = inlined = 0
    for loc, p in enumerate(procs):
        rows = _maps(Path(run.result.outdir / "raw" / f"p{p.pid}.maps"))
        base = min(a - off for a, b, off, f in rows if f == exe)
        mine = smp[smp["location"] == loc].reset_index(drop=True)
        assert len(mine) == len(p.sample_frames)
        offs = sorted(
            {int(a) - base for fr in p.sample_frames for a in fr if any(x <= a < y and f == exe for x, y, _, f in rows)}
        )
        want = _llvm_chain(exe, offs)
        others = _outside_chains(rows, exe, [int(a) for fr in p.sample_frames for a in fr])
        for k, fr in enumerate(p.sample_frames):
            chain = []
            outside = 0  # frames below the program's innermost one (a libc leaf such as memset)
            for a in np.asarray(fr, np.uint64)[::-1]:  # outermost first
                a = int(a)
                if any(x <= a < y and f == exe for x, y, _, f in rows):
                    chain += want[a - base]
                    outside = 0
                else:  # a library frame: as many names as its inline chain (printf -> __vfprintf_internal ...)
                    outside += others.get(a, 1)
            fn = [c[0] for c in chain]
            if "main" not in fn:
                continue  # a frame outside the program (libc, MPI): not resolved against the executable
            expect = fn[len(fn) - 1 - fn[::-1].index("main") :]
            got = [names[r] for r in frames.get(int(mine["stack"][k]), [])]
            assert got[: len(expect)] == expect, f"sample {k} of rank {p.rank}: {got} != llvm-symbolizer {expect}"
            assert len(got) - len(expect) <= outside, f"sample {k} of rank {p.rank}: {got} beyond {expect}"
            checked += 1
            inlined += "halo::Grid::slow_compute(long)" in got
    assert checked >= 30 and inlined >= 20
    # the inlined function's frame has its own file and a line inside it
    reg = raw.regions[raw.regions["name"] == "halo::Grid::slow_compute(long)"].iloc[0]
    lo, hi = site_line("halo_slow.cpp", "cpp_slow_begin"), site_line("halo_slow.cpp", "cpp_slow_end")
    assert reg["file"].endswith("halo_slow.cpp") and lo <= reg["line"] <= hi


def test_call_lines_are_the_call_statement(recorded) -> None:  # noqa: ANN001
    """The line of an MPI call site (a return address minus one) is the line of the call statement."""
    run = recorded("halo_slow.cpp", n=4, flags=("-O3",))
    calls = run.calls()
    for name, tag in (("MPI_Allreduce", "cpp_allreduce"), ("MPI_Waitall", "cpp_waitall")):
        assert set(calls.loc[calls["name"] == name, "line"]) == {site_line("halo_slow.cpp", tag)}
    # the inlined call chain: Waitall is called from exchange(), inlined into step()
    assert set(calls.loc[calls["name"] == "MPI_Waitall", "caller"]) == {"halo::Grid::exchange()"}


def test_fortran_names() -> None:
    assert clean_name("slow_compute_", "/x/halo.f90") == "slow_compute"
    assert clean_name("__halo_kernels_MOD_slow_compute", "/x/halo.f90") == "halo_kernels::slow_compute"
    assert clean_name("do_work_", "/x/kernel.c") == "do_work_"  # a C name keeps its underscore
    assert clean_name("MAIN__", "/x/prog.f90") == "MAIN__"


def test_addr2line_fallback_is_parsed(tmp_path: Path) -> None:
    """Without llvm-symbolizer the addr2line output (inline chains) is parsed; names as addr2line gives them."""
    from perflow.recorder.symbols import Resolver

    src = tmp_path / "t.c"
    src.write_text("__attribute__((noinline)) int f(int x) { return x + 1; }\nint main(void) { return f(1); }\n")
    exe = tmp_path / "t"
    subprocess.run(["gcc", "-O1", "-g", "-o", str(exe), str(src)], check=True)
    addr = int(
        subprocess.run(["nm", str(exe)], capture_output=True, text=True).stdout.split(" T f\n")[0].split()[-1], 16
    )
    for backend in ("addr2line", "llvm-symbolizer"):
        if backend == "llvm-symbolizer" and shutil.which(backend) is None:
            continue
        r = Resolver(backend=backend)
        assert r.backend == backend
        (frame,) = r.frames(str(exe), addr)
        name, file, line, module = frame[:4]
        assert (name, Path(file).name, line, module) == ("f", "t.c", 1, str(exe))
