"""Findings name the user's code, not the library a sample's leaf is in (``[vdso]``, libc, the MPI library).

A busy-waiting rank spends its time in ``clock_gettime``: the samples' leaf is
the vDSO's code (``main/delay/now/__clock_gettime/[vdso]``). The call tree and
the tables keep that leaf; a finding names the innermost caller that is the
user's code (:func:`perflow.sdk.profile.code_vertices`) and says which library
code below it the time was in. First the rule on hand-made stacks (no MPI
needed), then the recorded ``late_sender.c``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import perflow
from perflow.kinds import is_library_module
from perflow.passes.delay import root_cause
from perflow.passes.findings import findings
from perflow.sdk.profile import code_vertices
from perflow.trace.build import build_pag
from perflow.trace.builder import TraceBuilder

#: module of each frame of the hand-made stacks (the program is ``prog``)
MODULES = {
    "prog": "prog", "main": "prog", "delay": "prog", "now": "prog",
    "__clock_gettime": "libc.so.6", "[vdso]": "[vdso]", "memcpy": "libc.so.6",
    "mca_pml_ob1_progress": "libmpi.so.40", "_start": "libc.so.6", "__libc_start_main": "libc.so.6",
    "MPI_Allreduce": "libmpi.so.40",  # as a profile (HPCToolkit) gives an MPI call: still the user's call
}  # fmt: skip


def _pag(stacks: dict[tuple[str, ...], float]) -> perflow.PAG:
    """Rank 0 runs the sampled ``stacks`` (seconds each) before an allreduce rank 1 reaches at once."""
    tb = TraceBuilder()
    span = sum(stacks.values())
    with tb.region(0, "prog", 0.0, span + 1.0):
        t = 0.0
        for stack, secs in stacks.items():
            t += secs
            tb.sample(0, t, list(stack), secs)
        tb.call(0, "MPI_Allreduce", span, span + 1.0, coll={"bytes": 8}, stack=["main"])
    with tb.region(1, "prog", 0.0, span + 1.0):
        tb.call(1, "MPI_Allreduce", 0.0, span + 1.0, coll={"bytes": 8}, stack=["main"])
    raw = tb.raw()
    raw.regions["module"] = [MODULES.get(str(n), "") for n in raw.regions["name"]]  # as the recorder names them
    raw.regions.loc[raw.regions["name"].astype(str).str.startswith("Loop@"), "role"] = "loop"
    return build_pag(raw)


def _named(pag: perflow.PAG) -> dict[str, str]:
    """Per call path, the call path that names its code."""
    paths = pag.call_paths().astype(str).to_numpy()
    return dict(zip(paths, paths[code_vertices(pag)], strict=True))


def test_library_modules() -> None:
    for m in ("[vdso]", "libc.so.6", "libm.so.6", "libc-2.31.so", "ld-linux-x86-64.so.2", "libpthread.so.0",
              "libmpi.so.40", "libopen-pal.so.40", "libpfrec.so", "libpsm2.so.2.2",
              "/usr/lib/x86_64-linux-gnu/libfoo.so.1"):  # fmt: skip
        assert is_library_module(m), m
    for m in ("", "prog", "late_sender", "libsolver.so", "libcommon.so.2", "python", "/home/me/lib/libmine.so"):
        assert not is_library_module(m), m


def test_the_rule_on_hand_made_stacks() -> None:
    pag = _pag(
        {
            ("main", "delay", "now", "__clock_gettime", "[vdso]"): 3.0,  # a vDSO leaf below a libc frame
            ("main", "delay", "memcpy"): 1.0,  # a libc leaf
            ("main", "mca_pml_ob1_progress"): 0.5,  # an MPI library leaf
            ("_start", "__libc_start_main"): 0.25,  # all in libraries below the program's root
            ("main", "delay"): 0.25,
            ("main", "delay", "memcpy", "Loop@memmove.S:12"): 0.25,  # a loop without a module: its function's
        }
    )
    named = _named(pag)
    assert named["prog/main/delay/now/__clock_gettime/[vdso]"] == "prog/main/delay/now"
    assert named["prog/main/delay/now/__clock_gettime"] == "prog/main/delay/now"
    assert named["prog/main/delay/memcpy"] == "prog/main/delay"
    assert named["prog/main/delay/memcpy/Loop@memmove.S:12"] == "prog/main/delay"
    assert named["prog/main/mca_pml_ob1_progress"] == "prog/main"
    assert named["prog/_start/__libc_start_main"] == "prog/_start/__libc_start_main"  # no user caller: itself
    assert named["prog/_start"] == "prog/_start"
    for own in ("prog", "prog/main", "prog/main/delay", "prog/main/delay/now", "prog/main/MPI_Allreduce"):
        assert named[own] == own
    # the call tree and the tables keep the library frames
    causes = root_cause(pag, long_term=True)["causes"]
    assert "prog/main/delay/now/__clock_gettime/[vdso]" in set(causes["call_path"].astype(str))


def test_a_pag_without_modules_is_unchanged() -> None:
    tb = TraceBuilder()
    with tb.region(0, "prog", 0.0, 2.0):
        tb.sample(0, 1.0, ["main", "[vdso]"], 1.0)
    pag = tb.build()
    assert np.array_equal(code_vertices(pag), np.arange(pag.n_vertices))


def test_the_findings_name_the_caller_and_say_the_library_code() -> None:
    pag = _pag({("main", "delay", "now", "__clock_gettime", "[vdso]"): 3.0, ("main", "delay", "now"): 1.0})
    f = findings(root_cause(pag, long_term=True), pag)
    first = f.iloc[0]
    assert first["kind"] == "root cause" and first["where"] == "now" and first["processes"] == "0"
    assert first["call_path"] == "prog/main/delay/now"
    # the costs of the library call path and of now's own time add up: 4 s of waiting caused, 2 s per rank
    assert first["cost"] == pytest.approx(2.0)
    assert "delays others: 4.00 s of waiting in total" in first["what"]
    assert "through __clock_gettime/[vdso] (library code it calls, 75% of it)" in first["what"], first["what"]
    assert not f["where"].str.contains(r"\[vdso\]|__clock_gettime").any()
    assert int(first["row"]) == 0  # the row of the library call path, the costliest (the leaf one click away)


@pytest.mark.mpi
def test_the_recorded_late_sender_names_its_code(recorded) -> None:  # noqa: ANN001
    """Rank 0 busy-waits in ``delay`` calling ``clock_gettime`` (``now``, inlined): the first finding is that code."""
    run = recorded("late_sender.c", "3", "0.1", n=2)
    pag = build_pag(run.raw)
    rc = perflow.run("root_cause", pag=pag, outputs=["causes", "by_process", "summary", "off_cpu"], jobs=1)
    f = findings(rc.outputs, pag)
    first = f[~f["context"]].iloc[0]
    where, path = str(first["where"]), str(first["call_path"])
    assert first["kind"] == "root cause" and first["processes"] == "0", first.to_dict()
    assert where.split(" ")[0] in ("delay.isra.0", "delay", "now"), where  # now is inlined in delay
    assert Path(str(first["source"]).rsplit(":", 1)[0]).name == "late_sender.c", first["source"]
    assert "/delay" in path and "[vdso]" not in path and "clock_gettime" not in path, path
    assert "explains " in first["what"] and "Late Sender waiting in MPI_Recv on rank 1" in first["what"]
    # the tree keeps the samples' library leaves
    names = set(pag.vertex_table["name"].astype(str))
    assert names & {"[vdso]", "__clock_gettime", "clock_gettime"}, names
    # the recorder's summary lists a library leaf's self time with the user's code that called it
    from perflow.recorder.summary import summarize

    hot = {name: where for name, where, _ in summarize(run.raw).hotspots}
    for name in names & {"[vdso]", "__clock_gettime", "clock_gettime"} & set(hot):
        assert " in now (" in hot[name] or " in delay" in hot[name], hot
