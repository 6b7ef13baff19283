"""Run a Python program under the recorder: ``python -m perflow_pyrec TARGET [ARGS...]``.

TARGET is a script path, ``-m MODULE`` or ``-c CODE``, as for ``python``;
``sys.argv``, ``sys.path[0]``, the exit status and tracebacks are those the
program would have had without the recorder. Recording happens only when
``PERFLOW_RECORD_DIR`` is set (see :mod:`.recorder`).
"""

from __future__ import annotations

import atexit
import builtins
import importlib.machinery
import io
import os
import runpy
import sys
import types
import zipfile

from . import mpi as pympi  # imported before recording starts: its import is not the program's
from .recorder import start_from_env

__all__ = ["main"]


def _strip_boot_frames(tb: object) -> object:
    """Drop the traceback entries of this module and runpy."""
    here = os.path.abspath(__file__)
    skip = {here, os.path.abspath(runpy.__file__), "<frozen runpy>"}
    while tb is not None and (tb.tb_frame.f_code.co_filename in skip):  # type: ignore[attr-defined]
        tb = tb.tb_next  # type: ignore[attr-defined]
    return tb


def _run_script(target: str) -> None:
    """Run a script file as ``__main__`` the way ``python script.py`` does (``__file__`` absolute)."""
    path = os.path.abspath(target)
    if not os.path.isfile(path) or zipfile.is_zipfile(path):  # directories and zip files with __main__.py
        runpy.run_path(target, run_name="__main__")
        return
    with io.open_code(path) as f:
        code = compile(f.read(), path, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    exec(code, module.__dict__)  # noqa: S102


def main(argv: list[str] | None = None) -> None:
    """Record and run the program named by ``argv`` (default ``sys.argv[1:]``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print("usage: python -m perflow_pyrec (SCRIPT | -m MODULE | -c CODE) [ARGS...]", file=sys.stderr)
        raise SystemExit(2)
    mode = argv[0] if argv[0] in ("-m", "-c") else "script"
    if mode != "script" and len(argv) < 2:
        print(f"perflow-recorder: argument expected for {mode}", file=sys.stderr)
        raise SystemExit(2)
    target = argv[1] if mode != "script" else argv[0]
    rest = argv[2:] if mode != "script" else argv[1:]

    rec = start_from_env(program=os.path.abspath(target) if mode == "script" else f"{mode} {target}")
    if rec is not None:
        pympi.install(rec)
        atexit.register(rec.close)  # registered first, so it runs after every other exit handler

    # give the program the interpreter state it would have had without us
    added = os.environ.pop("PERFLOW_RECORD_PYTHONPATH_ADDED", "")
    if added:
        if added in sys.path:
            sys.path.remove(added)
        orig = os.environ.pop("PERFLOW_RECORD_ORIG_PYTHONPATH", None)
        if orig is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = orig
    try:
        if mode == "script":
            sys.argv = [target, *rest]
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            _run_script(target)
        elif mode == "-m":
            sys.argv = [target, *rest]
            sys.path[0] = os.getcwd()
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *rest]
            sys.path[0] = ""
            main_module = types.ModuleType("__main__")
            sys.modules["__main__"] = main_module
            exec(compile(target, "<string>", "exec"), main_module.__dict__)  # noqa: S102
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:  # print as the interpreter would, without our frames
        exc.__traceback__ = _strip_boot_frames(exc.__traceback__)  # type: ignore[assignment]
        sys.excepthook(type(exc), exc, exc.__traceback__)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
