"""The extension recipes of docs/architecture.md, tried out of tree.

``tests/arch/plugin`` is a tiny plug-in package (``pfdemo``): a reader, a pass
over a partitioned analysis with its settings declared once, a flow library
and an engine, each registered through its entry point as the recipes say.
It is installed once (``pip install --no-deps --target``, offline) into a
folder that the test's interpreters put on ``sys.path``; nothing of perflow
knows it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN = Path(__file__).with_name("plugin")

# rank 0: main 1 s, main;solve 2 s; rank 1: main;solve 3 s, main;io 0.5 s
PROFILE = "0 main 1.0\n0 main;solve 2.0\n1 main;solve 3.0\n1 main;io 0.5\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The folder pfdemo is installed into, and a pfdemo profile."""
    root = tmp_path_factory.mktemp("recipes")
    src = root / "src"
    shutil.copytree(PLUGIN, src)  # pip builds in the source folder: a copy keeps the checkout clean
    target = root / "site"
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "--target",
        str(target),
        str(src),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if out.returncode != 0:
        pytest.fail(f"installing the plug-in failed:\n{out.stderr}")
    profile = root / "run.pfdemo"
    profile.write_text(PROFILE, encoding="utf-8")
    return target, profile


def _python(site: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, env=env, timeout=300
    )


CHECKS = """
    import json, logging, sys
    from perflow.flow.registry import pass_infos
    infos = pass_infos()  # listing: perflow's own pass modules stay unimported
    listed = {
        "pass": infos["pfdemo_totals"].module,
        "perflow_pass_modules": sorted(m for m in sys.modules if m.startswith("perflow.passes.")),
    }
    import perflow
    from perflow.errors import ValidationError
    from perflow.flow.engine import engine_names, make_engine
    from perflow.flow.library import flow_names
    from perflow.readers import formats

    path = sys.argv[1]
    out = {"listed": listed, "formats": "pfdemo" in formats(), "flows": "pfdemo_flow" in flow_names()}
    out["engines"] = "pfdemo" in engine_names()

    # the reader: found by its detect(), values as written
    pag = perflow.read(path)
    m = pag.metrics.reset_index()
    out["read"] = {
        "format": pag.attrs.get("format"),
        "cells": sorted(
            (str(pag.vertex_table.loc[v, "name"]), int(p), float(t))
            for v, p, t in zip(m["vertex"], m["process"], m["time_inc"])
        ),
    }

    # the pass and its analysis, in a flow of our own and in the library's flow
    mine = perflow.Flow("mine")
    mine.output("t", mine.step("t", "pfdemo_totals", mine.input("pag", perflow.PAG)))
    res = perflow.run(mine, pag=pag)
    res.raise_for_status()
    out["totals"] = res["t"].set_index("name")["time_exc"].to_dict()
    res = perflow.run("pfdemo_flow", pag=path)
    res.raise_for_status()
    out["flow_max"] = res["totals"].set_index("name")["time_exc"].to_dict()

    # settings declared once: a bad value is refused before anything runs, with the allowed values
    flow = perflow.Flow("bad")
    flow.output("t", flow.step("t", "pfdemo_totals", flow.input("pag", perflow.PAG), how="median"))
    try:
        flow.validate()
        out["refused"] = None
    except ValidationError as exc:
        out["refused"] = str(exc)

    # the engine: its PAGs come through PAG(vertices, tables=..., executor=...)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)
    eng = make_engine("pfdemo")
    res = perflow.run("pfdemo_flow", pag=path, engine=eng)
    res.raise_for_status()
    out["engine_max"] = res["totals"].set_index("name")["time_exc"].to_dict()
    out["engine_ran"] = eng.executor.ran
    out["declined"] = eng.read("examples/data/ring8/traces.otf2", "otf2") is None
    print(json.dumps(out))
"""


def test_every_recipe_works_from_an_installed_plug_in(site: tuple[Path, Path]) -> None:
    target, profile = site
    out = _python(target, CHECKS, str(profile))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["listed"]["pass"] == "pfdemo.passes"
    assert got["listed"]["perflow_pass_modules"] == []
    assert got["formats"] and got["flows"] and got["engines"]
    # time_inc derived from the exclusive times: main = 1 + 2 on rank 0, 3 + 0.5 on rank 1
    assert got["read"]["format"] == "pfdemo"
    assert got["read"]["cells"] == [
        ["io", 1, 0.5], ["main", 0, 3.0], ["main", 1, 3.5], ["solve", 0, 2.0], ["solve", 1, 3.0]
    ]  # fmt: skip
    assert got["totals"] == {"main": 1.0, "solve": 5.0, "io": 0.5}
    assert got["flow_max"] == {"main": 1.0, "solve": 3.0, "io": 0.5}
    assert (
        "how" in got["refused"]
        and "median" in got["refused"]
        and "'sum'" in got["refused"]
        and "'max'" in got["refused"]
    )
    assert got["engine_max"] == got["flow_max"]
    assert got["engine_ran"] == ["pfdemo.totals"]  # the analysis ran through the engine's executor
    assert got["declined"]
    assert "engine pfdemo declines" in out.stderr and "reads pfdemo files only" in out.stderr


def test_the_command_line_runs_the_plug_in(site: tuple[Path, Path]) -> None:
    target, profile = site
    code = "import sys; from perflow.cli.main import main; sys.exit(main(sys.argv[1:]))"
    out = _python(target, code, "run", "pfdemo_flow", "--input", str(profile), "--engine", "pfdemo", "-q")
    assert out.returncode == 0, out.stderr
    table = out.stdout.split("name   time_exc", 1)[1].splitlines()[2:]  # after the findings, the flow's output
    assert [line.split() for line in table] == [["main", "1.00", "s"], ["solve", "3.00", "s"], ["io", "500", "ms"]]
