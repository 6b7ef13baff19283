"""Filter files: which functions compiler instrumentation records, in Score-P's filter-file syntax.

A filter file has up to two kinds of blocks, any number of each::

    # comments run to the end of a line
    SCOREP_REGION_NAMES_BEGIN
      EXCLUDE *
      INCLUDE main solve*
              step           # a rule goes on over lines until the next keyword
      EXCLUDE MANGLED _ZN6Domain1xEi
    SCOREP_REGION_NAMES_END

    SCOREP_FILE_NAMES_BEGIN
      EXCLUDE */include/* /usr/*
      INCLUDE */src/*
    SCOREP_FILE_NAMES_END

Patterns are shell globs (``*``, ``?``, ``[...]``; a backslash makes the next
character literal, so ``\\*`` is a star) matched against the whole name:
region rules against the demangled name with its parameters as perflow shows
it (``Domain::x(int)``), or with ``MANGLED`` against the linker name; file
rules against the path of the file that defines the function. Within a kind
the rules are applied in order and the last one that matches decides; a
function is recorded unless its file or its name ends up excluded.

The same file serves ``perflow record --filter`` (run time: the excluded
functions' entry addresses are looked up in the program's symbol tables
before the run and the recorder never records them) and ``perflow cc/cxx/fc
--filter`` (compile time: what GCC's ``-finstrument-functions-exclude-*``
options can express, see :func:`compile_time_lists`). ``perflow score``
writes one (:meth:`Filter.text`).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FormatError

__all__ = [
    "Filter",
    "Rule",
    "parse_filter",
    "read_filter",
    "DEFAULT_FILTER",
    "compile_time_lists",
    "base_name",
    "glob_escape",
]

_BLOCKS = {
    "SCOREP_REGION_NAMES_BEGIN": ("names", "SCOREP_REGION_NAMES_END"),
    "SCOREP_FILE_NAMES_BEGIN": ("files", "SCOREP_FILE_NAMES_END"),
}
_ENDS = {end: kind for kind, end in _BLOCKS.values()}


@dataclass(frozen=True)
class Rule:
    """One pattern of a filter: include or exclude, against mangled names or not, and where it was written."""

    include: bool
    pattern: str
    mangled: bool = False
    line: int = 0
    source: str = ""

    def matches(self, text: str) -> bool:
        return _glob(self.pattern).fullmatch(text) is not None


_GLOBS: dict[str, re.Pattern[str]] = {}


def _glob(pattern: str) -> re.Pattern[str]:
    """A glob as a regular expression; ``\\x`` is a literal ``x``."""
    rx = _GLOBS.get(pattern)
    if rx is None:
        parts, i = [], 0
        while i < len(pattern):
            c = pattern[i]
            if c == "\\" and i + 1 < len(pattern):
                parts.append(re.escape(pattern[i + 1]))
                i += 2
                continue
            if c == "[":
                j = pattern.find("]", i + 2)
                if j > 0:
                    parts.append(fnmatch.translate(pattern[i : j + 1])[4:-3])
                    i = j + 1
                    continue
            parts.append(".*" if c == "*" else "." if c == "?" else re.escape(c))
            i += 1
        rx = _GLOBS[pattern] = re.compile("".join(parts), re.DOTALL)
    return rx


@dataclass
class Filter:
    """The rules of a filter file, in order (see the module docstring)."""

    names: list[Rule] = field(default_factory=list)
    files: list[Rule] = field(default_factory=list)
    source: str = ""

    def __bool__(self) -> bool:
        return bool(self.names or self.files)

    def excludes(self, name: str, file: str = "", mangled: str = "") -> bool:
        """Whether a function is excluded: by the last matching file rule, or by the last matching name rule."""
        return self.excludes_file(file) or self.excludes_name(name, mangled)

    def excludes_file(self, file: str) -> bool:
        out = False
        for r in self.files:
            if file and r.matches(file):
                out = not r.include
        return out

    def excludes_name(self, name: str, mangled: str = "") -> bool:
        out = False
        for r in self.names:
            text = mangled if r.mangled else name
            if text and r.matches(text):
                out = not r.include
        return out

    def __add__(self, other: Filter) -> Filter:
        """Both filters' rules, this one's first (the other's rules decide where both match)."""
        return Filter(self.names + other.names, self.files + other.files, self.source or other.source)

    def text(self, header: str = "") -> str:
        """The filter in Score-P's syntax (patterns escaped where needed)."""
        out = [f"# {h}" if h else "#" for h in header.splitlines()] if header else []
        for kind, begin in (("names", "SCOREP_REGION_NAMES_BEGIN"), ("files", "SCOREP_FILE_NAMES_BEGIN")):
            rules = getattr(self, kind)
            if not rules:
                continue
            out.append(begin)
            last: tuple[bool, bool] | None = None
            for r in rules:
                key = (r.include, r.mangled)
                word = ("INCLUDE" if r.include else "EXCLUDE") + (" MANGLED" if r.mangled else "")
                pat = _escape(r.pattern)
                if key == last:
                    out.append(f"  {' ' * len(word)} {pat}")
                else:
                    out.append(f"  {word} {pat}")
                last = key
            out.append(begin.replace("_BEGIN", "_END"))
        return "\n".join(out) + "\n"


def glob_escape(name: str) -> str:
    """A pattern matching exactly ``name``: the glob characters ``* ? [ ] \\`` escaped."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", name)


def _escape(pattern: str) -> str:
    """Escape what the file syntax would otherwise split or read as a keyword: blanks and ``#``."""
    s = re.sub(r"([\s#])", r"\\\1", pattern)
    return "\\" + s if s in ("INCLUDE", "EXCLUDE", "MANGLED") or s in _BLOCKS or s in _ENDS else s


def _tokens(line: str) -> list[str]:
    """Whitespace-separated words of a line up to an unescaped ``#``; escapes are kept for the glob."""
    out, cur, i, esc = [], "", 0, False
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            nxt = line[i + 1]
            # an escaped blank or '#' becomes that character (literal in the glob too); others stay escaped
            cur += ("\\" + nxt) if not nxt.isspace() and nxt != "#" else nxt
            esc = True
            i += 2
            continue
        if c == "#":
            break
        if c.isspace():
            if cur or esc:
                out.append(cur)
            cur, esc = "", False
        else:
            cur += c
        i += 1
    if cur or esc:
        out.append(cur)
    return out


def parse_filter(text: str, source: str = "<filter>") -> Filter:
    """Parse a filter file's text (Score-P syntax, see the module docstring).

    Raises
    ------
    FormatError
        Naming the file and line: a rule outside a block, a block left open
        or nested, ``MANGLED`` in a file block, a keyword without patterns,
        an unknown word where a keyword is expected.
    """
    flt = Filter(source=source)
    kind: str | None = None
    opened = 0
    rule: tuple[bool, bool, int] | None = None  # (include, mangled, line of the keyword)
    pending = 0  # patterns since the keyword

    def fail(line: int, msg: str) -> FormatError:
        return FormatError(source, msg, f"line {line}")

    def close_rule(line: int) -> None:
        if rule is not None and pending == 0:
            word = ("INCLUDE" if rule[0] else "EXCLUDE") + (" MANGLED" if rule[1] else "")
            raise fail(rule[2], f"{word} without a pattern")

    lines = text.splitlines()
    for no, raw in enumerate(lines, 1):
        for tok in _tokens(raw):
            if tok in _BLOCKS:
                if kind is not None:
                    raise fail(no, f"{tok} inside the block opened at line {opened} (end it first)")
                kind, opened, rule, pending = _BLOCKS[tok][0], no, None, 0
                continue
            if tok in _ENDS:
                if kind != _ENDS[tok]:
                    what = f"the block opened at line {opened} is a {kind} block" if kind else "no block is open"
                    raise fail(no, f"{tok} but {what}")
                close_rule(no)
                kind, rule, pending = None, None, 0
                continue
            if kind is None:
                raise fail(
                    no,
                    f"{tok!r} outside a block: rules go between SCOREP_REGION_NAMES_BEGIN/END "
                    "or SCOREP_FILE_NAMES_BEGIN/END",
                )
            if tok in ("INCLUDE", "EXCLUDE"):
                close_rule(no)
                rule, pending = (tok == "INCLUDE", False, no), 0
                continue
            if tok == "MANGLED" and rule is not None and pending == 0 and not rule[1]:
                if kind == "files":
                    raise fail(no, "MANGLED applies to region names, not in a SCOREP_FILE_NAMES block")
                rule = (rule[0], True, rule[2])
                continue
            if rule is None:
                raise fail(no, f"{tok!r}: expected INCLUDE or EXCLUDE")
            r = Rule(include=rule[0], pattern=tok, mangled=rule[1], line=no, source=source)
            (flt.names if kind == "names" else flt.files).append(r)
            pending += 1
    if kind is not None:
        end = "SCOREP_REGION_NAMES_END" if kind == "names" else "SCOREP_FILE_NAMES_END"
        raise fail(opened, f"block not closed: {end} missing")
    return flt


def read_filter(path: str | Path) -> Filter:
    """Read and parse a filter file; errors name the file (and the line)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise FormatError(p, f"cannot read the filter file: {exc.strerror or exc}") from None
    return parse_filter(text, str(p))


#: What is never instrumented by default: functions defined in system and compiler headers
#: (the C and C++ standard libraries' inline code) and the C++ standard library's namespaces.
DEFAULT_FILTER = parse_filter(
    """
SCOREP_FILE_NAMES_BEGIN
  EXCLUDE /usr/include/* /usr/lib/gcc/* /usr/local/include/* /usr/lib/llvm-*
SCOREP_FILE_NAMES_END
SCOREP_REGION_NAMES_BEGIN
  EXCLUDE std::* __gnu_cxx::* __cxxabiv1::* _GLOBAL__sub_I_* __static_initialization_and_destruction_*
SCOREP_REGION_NAMES_END
""",
    "<default filter>",
)


def base_name(name: str) -> str:
    """The qualified name of a demangled C++ function, without return type and parameters.

    ``double* Allocate<double>(unsigned long)`` gives ``Allocate<double>``,
    ``Domain::x(int) const`` ``Domain::x``; a C name is returned as it is.
    """
    s = name.strip()
    # strip trailing qualifiers after the parameter list: " const", " &", " &&", " volatile"
    s = re.sub(r"(\s*(const|volatile|&&|&|noexcept))+$", "", s)
    if s.endswith(")"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            c = s[i]
            if c == ")":
                depth += 1
            elif c == "(":
                depth -= 1
                if depth == 0:
                    s = s[:i]
                    break
    # drop a return type: the last blank outside template arguments (not in "operator new" etc.)
    depth = 0
    cut = -1
    for i, c in enumerate(s):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == " " and depth == 0 and not s[:i].endswith("operator"):
            cut = i
    return s[cut + 1 :] if cut >= 0 and not s[cut + 1 :].startswith(("<", ">")) else s


def compile_time_lists(flt: Filter, fortran: bool = False) -> tuple[list[str], list[str], list[str]]:
    """What of a filter GCC's ``-finstrument-functions-exclude-file-list``/``-function-list`` can express.

    GCC leaves a function uninstrumented when one of the listed strings is a
    substring of its file's path, or of its qualified name without
    parameters (``Domain::x`` for ``Domain::x(int)``). So an excluded file
    pattern turns into such a string when it has no wildcard other than a
    leading and a trailing ``*``; an excluded name pattern when it is a whole
    name (``Domain::x(int)`` gives ``Domain::x``, which also matches
    ``Domain::xd``: GCC cannot anchor a substring) or ``*text*``. Rules that
    a later ``INCLUDE`` of the same kind could undo, name prefixes
    (``std::*``) and ``MANGLED`` rules stay for the run-time filter of
    ``perflow record``. gfortran's name of a module procedure is the
    procedure's alone (``fortran=True``: ``solver::step`` gives ``step``).

    Returns
    -------
    files, functions, skipped : list of str
        The two lists, and a note per rule left to the run time.
    """
    files: list[str] = []
    funcs: list[str] = []
    skipped: list[str] = []
    for rules, out, kind in ((flt.files, files, "file"), (flt.names, funcs, "region")):
        last_include = max((k for k, r in enumerate(rules) if r.include), default=-1)
        for k, r in enumerate(rules):
            if r.include:
                continue
            why = ""
            core = r.pattern[1:] if r.pattern.startswith("*") else r.pattern
            core = core[:-1] if core.endswith("*") and not core.endswith("\\*") else core
            if k < last_include:
                why = "a later INCLUDE may undo it"
            elif r.mangled:
                why = "MANGLED names are matched at run time"
            elif re.search(r"(?<!\\)[*?\[]", core):
                why = "wildcards inside the pattern"
            elif kind == "region" and r.pattern != core and not r.pattern.startswith("*"):
                why = "GCC cannot anchor a name prefix (std::* would also hit f<std::string>)"
            literal = re.sub(r"\\(.)", r"\1", core)
            if kind == "region" and r.pattern == core:
                literal = base_name(literal)
                if fortran:
                    literal = literal.rsplit("::", 1)[-1]
            if not why and "," in literal:
                why = "a comma (GCC's list separator)"
            if not why and not literal:
                why = "it matches everything"
            if why:
                skipped.append(f"{r.source}:{r.line}: {kind} pattern {r.pattern!r} ({why}): applied at run time only")
                continue
            if literal not in out:
                out.append(literal)
    return files, funcs, skipped
