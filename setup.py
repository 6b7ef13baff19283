"""Build hook: perflow's numba kernels compiled ahead of time into the package (see perflow/_aot.py).

Everything else about the package is declared in pyproject.toml. After the
usual ``build_py``, the hook runs ``python -m perflow.cli.aot`` on the built
package (a wheel's build directory; for an editable install, the source tree)
in the interpreter that builds, outside pip's build isolation, so that it sees
the environment's numpy and numba. When they are missing (a first install into
an empty environment, where pip installs the dependencies after building), or
``PERFLOW_AOT=0``, the hook does nothing: kernels are then compiled on first use
as before.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithKernels(build_py):
    """``build_py``, then the shipped kernel cache (``perflow/_kernels/``)."""

    def run(self) -> None:
        super().run()
        if os.environ.get("PERFLOW_AOT", "1").strip().lower() in ("0", "no", "false", "off"):
            return
        editable = getattr(self, "editable_mode", False)
        base = ROOT if editable else Path(self.build_lib).resolve()
        dest = base / "perflow" / "_kernels"
        part = dest.with_name("_kernels.part")
        shutil.rmtree(part, ignore_errors=True)
        if dest.is_dir():  # a rebuild (editable): fresh entries load instead of compiling, stale ones are replaced
            shutil.copytree(dest, part)
            shutil.rmtree(dest)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONNOUSERSITE", "PYTHONHOME")}
        env.update(PYTHONPATH=str(base), PYTHONDONTWRITEBYTECODE="1", PERFLOW_AOT="1")
        env.pop("NUMBA_CACHE_DIR", None)
        t = time.perf_counter()
        res = subprocess.run(
            [sys.executable, "-m", "perflow.cli.aot", str(part), str(ROOT)],
            env=env,
            cwd=str(base),
            capture_output=True,
            text=True,
        )
        if res.returncode != 0:
            shutil.rmtree(part, ignore_errors=True)
            tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["?"]
            print(f"perflow: kernels not compiled ahead of time ({tail[0]}); they compile on first use")
            return
        part.rename(dest)
        print(res.stdout.strip() or f"perflow: kernels compiled ahead of time in {time.perf_counter() - t:.0f} s")


setup(cmdclass={"build_py": BuildPyWithKernels})
