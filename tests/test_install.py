"""A clean install: perflow installed into a fresh virtual environment writes nothing inside itself.

The README's two commands in order used to break an installation: the first
run cached compiled kernels inside the installed package, and the leftover
folder then shadowed the editable install of the second command. Here a real
``pip install .`` into a new virtual environment (offline: see
``tests/freshenv.py``) runs the README's flow as a user runs it (its output
equal to the compiled kernels' output of this checkout), compiles kernels of
both kinds (a ``njit`` kernel and an OTF2 decoder ``cfunc`` callback, through
the one decorator module every kernel uses, ``perflow._jit``), the package's
files are compared before and after, the compiled-kernel cache is found in the
per-user cache directory, a cache that cannot be written is survived, and an
editable reinstall answers ``perflow --version`` from another directory.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.freshenv import REPO, copy_source, make_env

pytestmark = pytest.mark.slow

RING8 = REPO / "examples" / "data" / "ring8" / "traces.otf2"


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    return res


#: a kernel (numba ``njit``) and an OTF2 decoder callback (``cfunc``), compiled from the installed copy
KERNELS = (
    "import numpy as np\n"
    "from perflow.trace.match import rank_within\n"
    "from perflow.readers.otf2._callbacks import cb_enter\n"
    "print(rank_within(np.array([3, 1, 3, 3, 1])).tolist())\n"
    "print('callback' if cb_enter.address else 'no callback')\n"
)


def _compiled_report(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """The README's first command run in this process (this checkout), every kernel compiled."""
    from perflow.cli.main import main

    monkeypatch.setenv("PERFLOW_JIT", "compile")
    capsys.readouterr()
    assert main(["run", "mpi_profiler", "--input", str(RING8)]) == 0
    return capsys.readouterr().out


def test_install_run_reinstall_editable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = copy_source(tmp_path / "src")
    fresh = make_env(tmp_path / "venv")
    fresh.install(src)
    site = fresh.site_packages
    pkg = site / "perflow"
    assert (pkg / "__init__.py").is_file() and (pkg / "passes" / "_index.json").is_file()
    before = _files(pkg)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    xdg = tmp_path / "xdg"
    base = fresh.env(XDG_CACHE_HOME=str(xdg))
    for k in ("PERFLOW_CACHE_DIR", "NUMBA_CACHE_DIR", "PERFLOW_JIT", "PYTHONDONTWRITEBYTECODE"):
        base.pop(k, None)

    # the installed copy is the one that runs
    where = _run([str(fresh.python), "-c", "import perflow; print(perflow.__file__)"], base, elsewhere).stdout
    assert Path(where.strip()).parent == pkg

    # the README's first command as a user runs it: the same report as this checkout's compiled kernels give
    default = _run([str(fresh.perflow), "run", "mpi_profiler", "--input", str(RING8)], base, elsewhere)
    assert "MPI call sites by total time" in default.stdout
    assert default.stdout == _compiled_report(monkeypatch, capsys)

    # kernels of both kinds compiled from the installed copy are cached per user, nothing inside the package
    compiled = _run([str(fresh.python), "-c", KERNELS], {**base, "PERFLOW_JIT": "compile"}, elsewhere)
    assert compiled.stdout.splitlines() == ["[0, 0, 1, 2, 1]", "callback"]
    cached = {p.name.split("-")[0] for p in (xdg / "perflow" / "numba").rglob("*.nbi")}
    assert {"match._rank_codes", "_callbacks.cb_enter"} <= cached, f"not in the per-user cache: {sorted(cached)}"
    assert _files(pkg) == before, f"written inside the package: {sorted(_files(pkg) - before)}"

    # a cache that cannot be written: kernels compile anyway (uncached), with a warning saying how to fix it
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    ro = _run(
        [str(fresh.python), "-c", KERNELS],
        {**base, "PERFLOW_JIT": "compile", "PERFLOW_CACHE_DIR": str(blocker / "cache")},
        elsewhere,
    )
    assert ro.stdout.splitlines() == ["[0, 0, 1, 2, 1]", "callback"]
    assert "cannot cache compiled kernels" in ro.stderr and "PERFLOW_CACHE_DIR" in ro.stderr
    assert _files(pkg) == before

    # the README's second command: an editable install over it leaves nothing behind to shadow it
    fresh.install(src, editable=True)
    assert not pkg.exists(), f"left in site-packages after uninstalling: {sorted(_files(pkg))}"
    version = _run([str(fresh.perflow), "--version"], base, elsewhere)
    assert version.stdout.strip() == "perflow 0.1.0"
    where = _run([str(fresh.python), "-c", "import perflow; print(perflow.__file__)"], base, elsewhere).stdout
    assert Path(where.strip()) == src / "perflow" / "__init__.py"
