"""Compiler instrumentation for ``perflow record``: the ``perflow cc``/``cxx``/``fc`` wrappers.

A wrapper runs the compiler (the MPI wrapper ``mpicc``/``mpicxx``/``mpifort``
of the MPI that ``perflow record`` uses, or the one given) with
``-finstrument-functions`` added to every compile step, so that each function
calls ``__cyg_profile_func_enter``/``exit``. Nothing extra is linked: glibc
defines empty hooks, and the recorder library that ``perflow record`` preloads
replaces them and records the calls as user-function regions (resolved to
name, file and line once per function after the run).

Filters, so that tiny functions do not drown the trace:

* compile time: functions defined in system headers (``/usr/include``,
  ``/usr/lib/gcc``, ``/usr/local/include``: the C++ standard library's inline
  code) are not instrumented, nor are files or functions given with
  ``--exclude-file``/``--exclude-function`` or excluded by a filter file
  (``--filter FILE``, Score-P syntax, as far as GCC's substring lists can
  express it: :func:`perflow.recorder.filters.compile_time_lists`);
  ``--only FILE-GLOB`` instruments only the translation units whose source
  matches;
* run time (``perflow record --filter FILE``): the functions the filter
  excludes are never recorded (their calls cost a counter increment);
* run time (``perflow record --min-call SECONDS``, default 10 us): a call
  shorter than that with nothing recorded inside it is dropped, and a
  function whose first 64 calls were all dropped is not recorded again.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RecordError
from .filters import DEFAULT_FILTER, Filter, compile_time_lists
from .toolchain import find_toolchain

__all__ = ["InstrumentOptions", "compiler_for", "instrumented_argv", "DEFAULT_EXCLUDED_DIRS", "LANGUAGES"]

#: Directories whose functions are never instrumented by default (system and compiler headers):
#: the file rules of :data:`perflow.recorder.filters.DEFAULT_FILTER`, as GCC's substrings.
DEFAULT_EXCLUDED_DIRS = tuple(compile_time_lists(DEFAULT_FILTER)[0])

#: wrapper name -> (environment variable naming the compiler, MPI wrapper names to look for)
LANGUAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "cc": ("PERFLOW_CC", ("mpicc",)),
    "cxx": ("PERFLOW_CXX", ("mpicxx", "mpic++", "mpiCC")),
    "fc": ("PERFLOW_FC", ("mpifort", "mpif90")),
}

_SOURCE_EXT = {
    ".c", ".cc", ".cpp", ".cxx", ".c++", ".C", ".f", ".for", ".f90", ".f95", ".f03", ".f08", ".F", ".F90",
}  # fmt: skip
_FORTRAN_EXT = {".f", ".for", ".f90", ".f95", ".f03", ".f08"}


@dataclass
class InstrumentOptions:
    """What to instrument.

    Attributes
    ----------
    exclude_files : list of str
        Path substrings: functions defined in matching files (headers
        included) are not instrumented (added to the system directories
        unless ``system`` is True).
    exclude_functions : list of str
        Function-name substrings not to instrument.
    only : list of str
        Globs on source files: when given, only matching translation units
        are instrumented.
    system : bool
        Instrument functions from system headers too.
    filter : Filter, optional
        A filter file's rules; what GCC can express of them is applied at compile time.
    """

    exclude_files: list[str] = field(default_factory=list)
    exclude_functions: list[str] = field(default_factory=list)
    only: list[str] = field(default_factory=list)
    system: bool = False
    filter: Filter | None = None


def compiler_for(lang: str, compiler: str | None = None) -> list[str]:
    """The compiler command of a language: ``compiler``, else ``$PERFLOW_CC``/``CXX``/``FC``, else the MPI wrapper.

    The MPI wrapper is the one of the implementation ``perflow record`` finds
    (Open MPI first), so that the program and the recorder use the same MPI.

    Raises
    ------
    RecordError
        When no compiler is found.
    """
    import shlex

    if lang not in LANGUAGES:
        raise RecordError(f"unknown language {lang!r}; one of {', '.join(LANGUAGES)}")
    var, names = LANGUAGES[lang]
    cmd = compiler or os.environ.get(var)
    if cmd:
        argv = shlex.split(cmd)
        if not shutil.which(argv[0]):
            raise RecordError(f"compiler not found: {argv[0]}")
        return argv

    tc = find_toolchain()
    mpicc = Path(tc.mpicc)
    for name in names:
        cand = mpicc.with_name(mpicc.name.replace("mpicc", name, 1))
        if cand.is_file():
            return [str(cand)]
        if shutil.which(name):
            return [str(shutil.which(name))]
    raise RecordError(f"no {'/'.join(names)} found next to {tc.mpicc}; give the compiler with --compiler or ${var}")


def _sources(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-") and Path(a).suffix in _SOURCE_EXT]


def instrumented_argv(compiler: list[str], args: list[str], opts: InstrumentOptions | None = None) -> list[str]:
    """The compile command with instrumentation flags added (unchanged for a pure link step).

    Parameters
    ----------
    compiler : list of str
        The compiler command.
    args : list of str
        The user's arguments.
    opts : InstrumentOptions, optional

    Returns
    -------
    list of str
    """
    opts = opts or InstrumentOptions()
    sources = _sources(args)
    if not sources:  # linking only: the hooks come from glibc, or from the recorder when recording
        return [*compiler, *args]
    if opts.only and not any(
        fnmatch.fnmatch(s, g) or fnmatch.fnmatch(Path(s).name, g) for s in sources for g in opts.only
    ):
        return [*compiler, *args]
    files = ([] if opts.system else list(DEFAULT_EXCLUDED_DIRS)) + list(opts.exclude_files)
    funcs = list(opts.exclude_functions)
    if opts.filter:
        fortran = all(Path(x).suffix.lower() in _FORTRAN_EXT for x in sources)
        ffiles, ffuncs, _ = compile_time_lists(opts.filter, fortran=fortran)
        files += [f for f in ffiles if f not in files]
        funcs += [f for f in ffuncs if f not in funcs]
    for what, items in (("file", files), ("function", funcs)):
        bad = [x for x in items if "," in x]
        if bad:
            raise RecordError(f"an excluded {what} cannot contain a comma: {bad[0]!r}")
    flags = ["-finstrument-functions"]
    if files:
        flags.append("-finstrument-functions-exclude-file-list=" + ",".join(files))
    if funcs:
        flags.append("-finstrument-functions-exclude-function-list=" + ",".join(funcs))
    if not any(a == "-g" or a.startswith(("-g1", "-g2", "-g3", "-ggdb", "-gdwarf")) for a in args):
        flags.append("-g")  # names, files and lines of the functions; changes no code
    return [*compiler, *flags, *args]
