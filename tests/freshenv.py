"""A fresh virtual environment with perflow installed into it, without the network.

Used by the install test (``tests/test_install.py``) and the start-up benchmark
(``benchmarks/bench_startup.py``). The environment sees the packages of the
running interpreter's environment (numpy, numba, ... and the build backend,
setuptools with wheel) through a ``.pth`` file, so ``pip install --no-deps
--no-build-isolation`` builds and installs perflow offline. The source tree is
copied first (``git ls-files`` when the tree is a git checkout), so the build
leaves nothing in the checkout.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FreshEnv", "make_env", "copy_source", "REPO"]

REPO = Path(__file__).resolve().parents[1]
_SKIP = {".git", "build", "dist", ".pytest_cache", ".ruff_cache", ".hypothesis", "__pycache__"}


@dataclass
class FreshEnv:
    """A virtual environment made by :func:`make_env`."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    @property
    def perflow(self) -> Path:
        return self.bin / "perflow"

    @property
    def site_packages(self) -> Path:
        out = subprocess.run(
            [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        )
        return Path(out.stdout.strip())

    def pip(self, *args: str, timeout: float = 900, **extra_env: str) -> subprocess.CompletedProcess:
        """Run the outer environment's pip on this environment (``pip --python``), offline and quiet."""
        cmd = [sys.executable, "-m", "pip", "--python", str(self.python), "--no-input", "-q", *args]
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra_env)
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        if res.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
        return res

    def install(self, source: Path, *, editable: bool = False, aot: bool = False) -> None:
        """``pip install [-e] SOURCE`` with no dependencies and no build isolation.

        ``aot``: let the build compile the kernels ahead of time (``setup.py``, some minutes); off by default
        (``PERFLOW_AOT=0``), so installing in a test costs seconds.
        """
        args = ("install", "--no-deps", "--no-build-isolation", *(["-e"] if editable else []), str(source))
        self.pip(*args, PERFLOW_AOT="1" if aot else "0")

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for running this venv's programs (its bin first on PATH, no PYTHONPATH)."""
        out = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        out["PATH"] = f"{self.bin}{os.pathsep}{out.get('PATH', '')}"
        out["VIRTUAL_ENV"] = str(self.root)
        out.update(extra)
        return out


def _outer_site_dirs() -> list[str]:
    dirs = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    out: list[str] = []
    for d in dirs:
        if d not in out and Path(d).is_dir():
            out.append(d)
    return out


def make_env(root: Path) -> FreshEnv:
    """Create a virtual environment at ``root`` that sees this interpreter's packages (not its perflow)."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(root)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    fresh = FreshEnv(Path(root))
    # plain directory entries: the outer environment's own .pth files (its editable perflow) are not processed
    (fresh.site_packages / "_outer_env.pth").write_text("".join(d + "\n" for d in _outer_site_dirs()))
    return fresh


def copy_source(dest: Path, repo: Path = REPO) -> Path:
    """Copy the source tree (tracked files, or everything but build products) to ``dest``."""
    try:
        files = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=repo,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout.split(b"\0")
        names = [f.decode() for f in files if f]
    except (OSError, subprocess.SubprocessError):
        names = [
            str(p.relative_to(repo))
            for p in repo.rglob("*")
            if p.is_file() and not _SKIP.intersection(p.relative_to(repo).parts) and ".egg-info" not in str(p)
        ]
    for name in names:
        src = repo / name
        if not src.is_file():  # deleted but still in the index
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    return dest
