"""The pass SDK: a pass written against perflow.sdk alone runs locally, in a flow, and on partitions."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow import sdk


def test_every_public_name_is_documented() -> None:
    for name in sdk.__all__:
        obj = getattr(sdk, name)
        doc = getattr(obj, "__doc__", None) if not isinstance(obj, sdk.Analysis) else obj.doc
        assert doc and doc.strip(), f"perflow.sdk.{name} has no documentation"


def test_metric_rows_are_read_only_and_not_copies() -> None:
    pag = perflow.synthetic.trace(nprocs=4, iterations=3)
    rows = pag.rows
    x = rows.column("time_exc")
    assert np.shares_memory(x, pag._metrics["time_exc"].to_numpy())  # a view of the table itself
    with pytest.raises(ValueError, match="read-only"):
        x[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        rows.vertex[0] = 1
    assert len(rows) == len(pag.metrics)
    np.testing.assert_array_equal(rows.process(), pag.metrics.index.get_level_values("process"))
    with pytest.raises(perflow.MetricError, match="unknown metric 'time_ex'; did you mean 'time_exc'"):
        rows.column("time_ex")


def test_a_pass_from_the_sdk_alone() -> None:
    @sdk.pass_(name="sdk_test_busiest", version="1")
    def busiest(pag: sdk.PAG, *, metric: str = "time_exc", k: int = 3) -> pd.DataFrame:
        """The k vertices with the largest maximum over processes."""
        st = sdk.vertex_stats_of(pag, metric, owner="sdk_test_busiest")
        ids = np.argsort(-st["max"], kind="stable")[:k]
        df = sdk.vertex_columns(pag, ids)
        df["max"] = st["max"][ids]
        df["on"] = st["argmax_process"][ids]
        return df

    pag = perflow.synthetic.trace(nprocs=6, iterations=4, slow_rank=4, slow_factor=5.0, seed=1)
    direct = busiest(pag)
    assert direct["name"].iloc[0] == "compute" and direct["on"].iloc[0] == 4
    # the statistics come from the PAG's analysis manager: a second call computes nothing
    assert pag.analyses.cached(sdk.VERTEX_STATS, metric="time_exc", across="process")
    flow = perflow.Flow("t")
    top = flow.step("b", "sdk_test_busiest", flow.input("pag", sdk.PAG), k=3)
    flow.output("top", top)
    res = perflow.run(flow, pag=pag)
    pd.testing.assert_frame_equal(res.outputs["top"], direct)
    with pytest.raises(sdk.SettingsError, match="sdk_test_busiest: setting across='rank' is not one of"):
        sdk.vertex_stats_of(pag, "time_exc", "rank", owner="sdk_test_busiest")


def test_subgraph_is_public() -> None:
    pag = perflow.synthetic.trace(nprocs=3, iterations=2)
    v = pag.vertex("MPI_Waitall").id
    sub = pag.subgraph([v])
    assert list(sub.call_paths()) == [p for p in pag.call_paths() if "MPI_Waitall".startswith(p.split("/")[-1]) or
                                      "main/timestep/exchange/MPI_Waitall".startswith(p)]  # fmt: skip
    assert sub.vertex_table["orig_vertex"].iloc[-1] == v


# ---------------------------------------------------------------- the built-in passes use the SDK, and nothing else

PERFLOW = Path(__file__).resolve().parents[2] / "perflow"
#: pass modules that may share private names: one family's modules
FAMILIES = [{"models", "_modelfit", "_modelquality"}, {"whatif", "_whatif", "_gains"}]


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """``(line, absolute module, names)`` of every import of perflow in a module of perflow."""
    pkg = ".".join(path.relative_to(PERFLOW.parent).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1] if node.level else []
            mod = ".".join([*base, *([node.module] if node.module else [])])
            out.append((node.lineno, mod, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
    return [(ln, m, n) for ln, m, n in out if m == "perflow" or m.startswith("perflow.")]


#: pass modules that still import perflow's layers directly (none: every built-in pass is on the SDK);
#: a module may be listed here only while it moves onto the SDK, and the list may only shrink
NOT_YET_ON_THE_SDK: set[str] = set()


def _outside_the_sdk(p: Path) -> list[str]:
    return [
        f"passes/{p.name}:{ln} imports {mod}"
        for ln, mod, _ in _imports(p)
        if not mod.startswith(("perflow.sdk", "perflow.passes"))
    ]


def test_built_in_passes_import_only_the_sdk_and_the_pass_library() -> None:
    files = sorted((PERFLOW / "passes").glob("*.py"))
    bad = [line for p in files if p.stem not in NOT_YET_ON_THE_SDK for line in _outside_the_sdk(p)]
    assert not bad, "a built-in pass needs something the SDK does not export:\n" + "\n".join(bad)
    clean = sorted(p.stem for p in files if p.stem in NOT_YET_ON_THE_SDK and not _outside_the_sdk(p))
    assert not clean, f"on the SDK now: take {clean} off NOT_YET_ON_THE_SDK"


def test_pass_families_share_no_private_names() -> None:
    def family(stem: str) -> set[str]:
        return next((f for f in FAMILIES if stem in f), {stem})

    bad = []
    for p in sorted((PERFLOW / "passes").glob("*.py")):
        for ln, mod, names in _imports(p):
            other = mod.rsplit(".", 1)[-1]
            if mod.startswith("perflow.passes.") and other not in family(p.stem):
                bad += [f"passes/{p.name}:{ln} takes {other}.{n}" for n in names if n.startswith("_")]
    assert not bad, "\n".join(bad)


def test_the_sdk_imports_no_private_module_and_no_pass() -> None:
    face = [(ln, m) for ln, m, _ in _imports(PERFLOW / "sdk" / "__init__.py")]
    assert face and not [
        f"sdk/__init__.py:{ln} imports {m}" for ln, m in face if any(p.startswith("_") for p in m.split("."))
    ]
    for p in sorted((PERFLOW / "sdk").glob("*.py")):
        assert not [m for _, m, _ in _imports(p) if m.startswith("perflow.passes")], p


def test_importing_the_sdk_registers_nothing() -> None:
    code = (
        "import sys, perflow.sdk, perflow.sdk.profile, perflow.sdk.trace, perflow.sdk.render, perflow.sdk.figures,"
        " perflow.sdk.io, perflow.sdk.readers\n"
        "from perflow.flow import registry\n"
        "print(len(registry._REGISTRY), sorted(m for m in sys.modules if m.startswith('perflow.passes')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["0", "[]"]
