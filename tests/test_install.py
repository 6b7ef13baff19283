"""A clean install: perflow installed into a fresh virtual environment writes nothing inside itself.

The README's two commands in order used to break an installation: the first
run cached compiled kernels inside the installed package, and the leftover
folder then shadowed the editable install of the second command. Here a real
``pip install .`` into a new virtual environment (offline: see
``tests/freshenv.py``) runs the README's flow with compiled kernels, the
package's files are compared before and after, the compiled-kernel cache is
found in the per-user cache directory, a cache that cannot be written is
survived, and an editable reinstall answers ``perflow --version`` from another
directory.
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


def test_install_run_reinstall_editable(tmp_path: Path) -> None:
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

    # the README's first command, with every kernel compiled (the path a large trace takes), then as a user runs it
    compiled = _run(
        [str(fresh.perflow), "run", "mpi_profiler", "--input", str(RING8)],
        {**base, "PERFLOW_JIT": "compile"},
        elsewhere,
    )
    assert "MPI call sites by total time" in compiled.stdout
    default = _run([str(fresh.perflow), "run", "mpi_profiler", "--input", str(RING8)], base, elsewhere)
    assert default.stdout == compiled.stdout

    # kernels were cached per user, and nothing was written inside the package
    cached = list((xdg / "perflow" / "numba").rglob("*.nbi"))
    assert cached, "no compiled kernel in the per-user cache"
    assert _files(pkg) == before, f"written inside the package: {sorted(_files(pkg) - before)}"

    # a cache that cannot be written: kernels compile anyway (uncached), with a warning saying how to fix it
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    snippet = (
        "import numpy as np\n"
        "from perflow.trace.match import rank_within\n"
        "print(rank_within(np.array([3, 1, 3, 3, 1])).tolist())\n"
    )
    ro = _run(
        [str(fresh.python), "-c", snippet],
        {**base, "PERFLOW_JIT": "compile", "PERFLOW_CACHE_DIR": str(blocker / "cache")},
        elsewhere,
    )
    assert ro.stdout.strip() == "[0, 0, 1, 2, 1]"
    assert "cannot cache compiled kernels" in ro.stderr and "PERFLOW_CACHE_DIR" in ro.stderr
    assert _files(pkg) == before

    # the README's second command: an editable install over it leaves nothing behind to shadow it
    fresh.install(src, editable=True)
    assert not pkg.exists(), f"left in site-packages after uninstalling: {sorted(_files(pkg))}"
    version = _run([str(fresh.perflow), "--version"], base, elsewhere)
    assert version.stdout.strip() == "perflow 0.1.0"
    where = _run([str(fresh.python), "-c", "import perflow; print(perflow.__file__)"], base, elsewhere).stdout
    assert Path(where.strip()) == src / "perflow" / "__init__.py"
