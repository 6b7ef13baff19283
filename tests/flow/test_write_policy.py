"""A flow cannot write what it was not given: path settings stay inside the run's output folder.

The hole (issue 18): the ``path`` setting of ``report``, ``render_table``, the
tree and plot passes, ``save_pag``, ... was taken as given, so a YAML flow
from someone else could overwrite any file the user can write (a login
script: code execution without ``--allow-import``).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import perflow
from perflow.cli.main import main
from perflow.errors import WriteRefused
from perflow.flow.registry import get_pass
from perflow.flow.writes import WritePolicy, current_write_policy, output_path, write_policy

from . import helpers  # noqa: F401 -- registers the t_* test passes

LOGIN = "# the user's login script\n"


@pytest.fixture(scope="module")
def syn() -> perflow.PAG:
    return perflow.synthetic.trace(nprocs=4, iterations=2, seed=1)


def _scaling() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [{"name": "solve", "nprocs": p, "time": 16.0 / p} for p in (2, 4, 8)]
    return pd.DataFrame(rows), pd.DataFrame({"name": ["solve"], "intercept": [4.0], "slope": [-1.0]})


#: every pass of the library with a ``path`` setting, with inputs to call it and the suffix it writes
WRITERS: dict[str, tuple[Any, str]] = {
    "report": (lambda pag: ([{"Hot": pag.vertices.top(3, "time_exc")}], {}), ".md"),
    "render_table": (lambda pag: ([pag.vertices.top(3, "time_exc")], {}), ".txt"),
    "report_page": (lambda pag: ([{}, pag, None], {}), ".html"),
    "save_pag": (lambda pag: ([pag], {}), ".pag"),
    "tree_text": (lambda pag: ([pag], {}), ".txt"),
    "tree_html": (lambda pag: ([pag], {}), ".html"),
    "tree_dot": (lambda pag: ([pag], {}), ".dot"),
    "timeline_html": (lambda pag: ([pag], {}), ".html"),
    "plot_timeline": (lambda pag: ([pag], {}), ".png"),
    "plot_process_bars": (lambda pag: ([pag], {}), ".png"),
    "plot_imbalance": (lambda pag: ([pag], {}), ".png"),
    "plot_comm_matrix": (lambda pag: ([pag], {}), ".png"),
    "plot_parallel_view": (lambda pag: ([pag, [("compute", 0), ("compute", 1)]], {}), ".png"),
    "parallel_view_dot": (lambda pag: ([pag, [("compute", 0), ("compute", 1)]], {}), ".dot"),
    "plot_breakdown": (
        lambda pag: ([pd.DataFrame({"process": [0, 1], "computation": [1.0, 2.0], "p2p": [0.5, 0.2]})], {}),
        ".png",
    ),
    "plot_scaling": (lambda pag: (list(_scaling()), {}), ".png"),
    "cube_file": (lambda pag: ([pag], {}), ".cubex"),
}


def test_every_pass_with_a_path_setting_is_covered() -> None:
    index = json.loads((Path(perflow.__file__).parent / "passes" / "_index.json").read_text())
    with_path = {name for name, e in index.items() if any(s[0] == "path" for s in e["settings"])}
    assert with_path == set(WRITERS), "a new pass writes files: add it to WRITERS"


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_each_writing_pass_obeys_the_policy(name: str, syn: perflow.PAG, tmp_path: Path) -> None:
    build, suffix = WRITERS[name]
    args, kw = build(syn)
    fn = get_pass(name)
    out, home = tmp_path / "out", tmp_path / "home"
    home.mkdir()
    victim = home / f"victim{suffix}"
    if suffix != ".pag":
        victim.write_text(LOGIN)
    with write_policy(out):
        for evil in (str(victim), f"../home/victim{suffix}", f"sub/../../home/victim{suffix}"):
            with pytest.raises(WriteRefused, match=r"setting path=.* writes to .*outside the folders this run may"):
                fn(*args, **kw, path=evil)
        fn(*args, **kw, path=f"sub/../r{suffix}")
    assert (out / f"r{suffix}").exists() and not (out / "sub").exists()
    assert not victim.exists() if suffix == ".pag" else victim.read_text() == LOGIN
    # called directly from Python, a pass writes where its caller says
    fn(*args, **kw, path=str(home / f"direct{suffix}"))
    assert (home / f"direct{suffix}").exists()


def test_resolution_rules(tmp_path: Path) -> None:
    out, extra, outside = tmp_path / "out", tmp_path / "extra", tmp_path / "outside"
    for d in (out, extra, outside):
        d.mkdir()
    pol = WritePolicy.make(out, [extra])
    assert pol.resolve("a/./b/../c.md") == out.resolve() / "a" / "c.md"
    assert pol.resolve(str(extra / "x.csv")) == extra.resolve() / "x.csv"
    assert pol.resolve("~/.bashrc") == out.resolve() / "~" / ".bashrc"  # no ~ expansion: a plain folder name
    with pytest.raises(WriteRefused, match="names the folder .* itself"):
        pol.resolve(".")
    with pytest.raises(WriteRefused, match="NUL"):
        pol.resolve("a\0b")
    # symbolic links on disk are followed before the check: a link planted in the output folder
    (out / "link").symlink_to(outside, target_is_directory=True)
    (out / "file.md").symlink_to(outside / "login")
    for p in ("link/x.md", "file.md"):
        with pytest.raises(WriteRefused, match=f"writes to {outside.resolve()}"):
            pol.resolve(p)
    # a run without an output folder writes nowhere unless allowed
    none = WritePolicy.make(None, [extra])
    with pytest.raises(WriteRefused, match="this run has no output folder"):
        none.resolve("r.md")
    assert none.resolve(str(extra / "r.md")) == extra.resolve() / "r.md"
    with pytest.raises(WriteRefused, match="--allow-write DIR"):
        none.resolve(str(outside / "r.md"))


def test_no_policy_outside_a_flow_run(tmp_path: Path) -> None:
    assert current_write_policy() is None
    assert output_path(str(tmp_path / "../x")) == tmp_path / "../x"
    assert output_path(None) is None and output_path("") is None


def _evil_flow(tmp_path: Path, target: str, *, pass_name: str = "render_table") -> Path:
    f = tmp_path / "stranger.yaml"
    f.write_text(
        f"""perflow: 1
name: stranger
steps:
  run: {{pass: synthetic, settings: {{nprocs: 2, iterations: 2}}}}
  hot: {{pass: hotspot, inputs: {{data: run}}, settings: {{k: 3}}}}
  rep:
    pass: {pass_name}
    inputs: {{data: hot}}
    settings: {{path: {json.dumps(target)}, format: csv}}
outputs:
  table: rep
"""
    )
    return f


def test_a_yaml_flow_cannot_overwrite_a_login_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    bashrc = home / ".bashrc"
    bashrc.write_text(LOGIN)
    out = tmp_path / "out"
    for target in (str(bashrc), "../home/.bashrc"):
        code = main(["run", str(_evil_flow(tmp_path, target)), "--output", str(out)])
        err = capsys.readouterr().err
        assert code == 2, err
        assert bashrc.read_text() == LOGIN
        assert "step 'rep' (pass 'render_table') failed: WriteRefused: setting path=" in err
        assert "outside the folders this run may write to" in err and "--allow-write DIR" in err
    # without --output the flow writes nowhere
    code = main(["run", str(_evil_flow(tmp_path, "table.csv"))])
    assert code == 2 and "this run has no output folder" in capsys.readouterr().err
    # inside the output folder: fine; elsewhere: only with --allow-write
    assert main(["run", str(_evil_flow(tmp_path, "t/table.csv")), "--output", str(out), "-q"]) == 0
    assert (out / "t" / "table.csv").read_text().startswith("vertex,name,")
    capsys.readouterr()
    code = main(["run", str(_evil_flow(tmp_path, str(bashrc))), "-o", str(out), "--allow-write", str(home), "-q"])
    assert code == 0 and bashrc.read_text().startswith("vertex,name,")


def test_the_policy_holds_in_worker_threads(tmp_path: Path) -> None:
    seen: list[tuple[str, WritePolicy | None]] = []
    lock = threading.Lock()

    @perflow.pass_(name="t_policy_probe")
    def probe(x: int) -> int:
        with lock:
            seen.append((threading.current_thread().name, current_write_policy()))
        return x

    f = perflow.Flow("probe")
    x = f.input("x", int)
    for i in range(4):
        f.output(f"o{i}", f.step(f"p{i}", probe, f.step(f"i{i}", "t_inc", x, by=i)))
    r = perflow.run(f, x=1, jobs=3, output_dir=tmp_path)
    assert r.ok and len(seen) == 4
    assert any(name.startswith("perflow") for name, _ in seen)  # some ran in the pool's threads
    assert {p.output_dir for _, p in seen} == {tmp_path.resolve()}
    assert current_write_policy() is None  # nothing leaks out of the run


def test_python_api_output_dir(tmp_path: Path, syn: perflow.PAG) -> None:
    f = perflow.Flow("save")
    f.output("where", f.step("s", "save_pag", f.input("pag", perflow.PAG), path="runs/a.pag"))
    r = perflow.run(f, pag=syn, output_dir=tmp_path / "o")
    assert r["where"] == str((tmp_path / "o" / "runs" / "a.pag").resolve())
    np.testing.assert_array_equal(perflow.load(r["where"]).metrics.to_numpy(), syn.metrics.to_numpy())
    bad = perflow.run(f, pag=syn, settings={"s.path": os.fspath(tmp_path / "x.pag")}, output_dir=tmp_path / "o")
    assert not bad.ok and isinstance(bad.errors["s"].error, WriteRefused)
    assert not (tmp_path / "x.pag").exists()


def test_steps_that_write_files_are_not_skipped_by_the_cache(tmp_path: Path, syn: perflow.PAG) -> None:
    f = perflow.Flow("rep")
    hot = f.step("hot", "hotspot", f.input("pag", perflow.PAG), k=3)
    f.output("text", f.step("rep", "render_table", hot, format="csv", path="hot.csv"))
    f.output("plain", f.step("plain", "render_table", hot, format="csv"))
    for out in ("a", "b"):
        r = perflow.run(f, pag=syn, cache=tmp_path / "c", output_dir=tmp_path / out)
        assert r.ok and (tmp_path / out / "hot.csv").read_text() == r["text"]
    status = dict(r.steps["status"])
    assert status["rep"] == "done" and status["plain"] == "cached"  # the one writing a file ran again
