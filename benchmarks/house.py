"""The house: how perflow's own modules depend on each other, as figures.

Reads the source (no import of perflow) and prints

* **modules**: Python modules under ``perflow/`` (the recorder's ``pyrt``,
  which runs inside recorded programs, left out), per part;
* **intra-package imports**: imports of perflow's own modules, split into
  those at module level and those **inside functions** (per part; the CLI's
  lazily loaded subcommands are counted apart); imports under
  ``if TYPE_CHECKING:`` are not run and are not counted;
* **dynamic imports**: ``importlib.import_module`` calls (string-named
  modules the static figures cannot see);
* **import circles**: strongly connected groups of two or more modules in the
  graph of run-time imports, and how many of them remain when only
  module-level imports are followed (the others close only through imports
  inside functions);
* **upward imports**: imports of a higher layer (the layers of
  ``tests/arch/test_layers.py``), and imports of another part's private
  (``_``-prefixed) module or name;
* the issue-26 greps: dispatch on ``__name__ == "PAG"``, access to the PAG's
  private tables (``._vertices``, ``._metrics``, ``._trace``, ``._executor``)
  outside ``perflow/pag``, private modules imported by ``perflow/sdk.py``.

    python benchmarks/house.py            # the figures
    python benchmarks/house.py --list     # and every in-function import, circle and upward import
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "perflow"
sys.path.insert(0, str(REPO))
from tests.arch.test_layers import LAYER  # noqa: E402  (one definition of the layers)


@dataclass(frozen=True)
class Imp:
    """One imported perflow module or name."""

    src: str  # importing module
    line: int
    target: str  # the module imported (a name of a module resolved to that module)
    names: tuple[str, ...]  # names taken from it ('' for `import x`)
    in_function: bool


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[:-1] if path.name == "__init__.py" else rel.parts
    return ".".join(parts)


def part_of(module: str) -> str:
    """The top-level part of perflow a module belongs to (``pag``, ``flow``, ``__init__``, ...)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py")) if "pyrt" not in p.parts}


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(module: str, path: Path, known: set[str]) -> tuple[list[Imp], int]:
    """The perflow imports of one module, and its number of ``import_module`` calls."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out: list[Imp] = []
    dynamic = 0

    def resolve(base: str, names: list[str]) -> list[tuple[str, tuple[str, ...]]]:
        # `from base import a, b`: a name that is itself a module is an import of that module
        mods, rest = [], []
        for n in names:
            (mods if f"{base}.{n}" in known else rest).append(n)
        res = [(f"{base}.{n}", ("",)) for n in mods]
        if rest or not names:
            res.append((base, tuple(rest)))
        return res

    def visit(node: ast.AST, in_fn: bool) -> None:
        nonlocal dynamic
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                for c in child.orelse:
                    visit(c, in_fn)
                continue
            fn = in_fn or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = ".".join(pkg.split(".")[: len(pkg.split(".")) - child.level + 1])
                    base = f"{base}.{child.module}" if child.module else base
                else:
                    base = child.module or ""
                if base == "perflow" or base.startswith("perflow."):
                    for target, names in resolve(base, [a.name for a in child.names]):
                        out.append(Imp(module, child.lineno, target, names, in_fn))
            elif isinstance(child, ast.Import):
                for a in child.names:
                    if a.name == "perflow" or a.name.startswith("perflow."):
                        out.append(Imp(module, child.lineno, a.name, ("",), in_fn))
            elif isinstance(child, ast.Call) and ast.unparse(child.func).endswith("import_module"):
                dynamic += 1
            visit(child, fn)

    visit(tree, False)
    return out, dynamic


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


PRIVATE_TABLES = re.compile(r"\.(_vertices|_metrics|_trace|_executor)\b")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list every in-function import, circle and upward import")
    args = ap.parse_args()

    mods = modules()
    known = set(mods)
    imps: list[Imp] = []
    dynamic: Counter[str] = Counter()
    for m, p in mods.items():
        got, dyn = imports_of(m, p, known)
        imps += got
        dynamic[part_of(m)] += dyn
    imps = [i for i in imps if i.target != i.src]

    per_part = Counter(part_of(m) for m in mods)
    print(f"modules: {len(mods)}  ({', '.join(f'{k} {v}' for k, v in per_part.most_common())})")
    top = [i for i in imps if not i.in_function]
    fn = [i for i in imps if i.in_function]
    fn_parts = Counter(part_of(i.src) for i in fn)
    outside_cli = sum(v for k, v in fn_parts.items() if k != "cli")
    print(f"intra-package imports: {len(imps)}  (module level {len(top)}, inside functions {len(fn)})")
    print(
        f"in-function imports: {len(fn)}, outside perflow/cli {outside_cli}  "
        f"({', '.join(f'{k} {v}' for k, v in fn_parts.most_common())})"
    )
    print(f"dynamic imports (import_module calls): {sum(dynamic.values())}  "
          f"({', '.join(f'{k} {v}' for k, v in dynamic.most_common() if v)})")  # fmt: skip

    def graph(sel: list[Imp]) -> dict[str, set[str]]:
        g: dict[str, set[str]] = defaultdict(set)
        for i in sel:
            if i.target in known:
                g[i.src].add(i.target)
        return g

    full = circles(graph(imps))
    static = circles(graph(top))
    print(
        f"import circles: {len(full)}  (of {sum(len(c) for c in full)} modules; "
        f"{len(static)} with module-level imports only, {len(full) - len(static)} close only through "
        f"imports inside functions)"
    )

    up = [i for i in imps if LAYER.get(part_of(i.target), 0) > LAYER.get(part_of(i.src), 0)]
    up = [i for i in up if part_of(i.target) != part_of(i.src)]

    def private(i: Imp) -> bool:
        if part_of(i.src) == part_of(i.target) and part_of(i.src) not in ("readers", "writers", "passes"):
            return False
        if i.src.rsplit(".", 1)[0] == i.target.rsplit(".", 1)[0] and i.src.count(".") > 1:
            same_family = True  # siblings in one package (a pass family, one reader's package)
        else:
            same_family = i.target.startswith(i.src.rsplit(".", 1)[0] + ".") and i.src.count(".") > 2
        if part_of(i.src) == part_of(i.target) and part_of(i.src) == "passes":
            same_family = False  # each pass module is its own family
        leaf = i.target.rsplit(".", 1)[-1]
        return not same_family and (leaf.startswith("_") and not leaf.startswith("__") or
                                    any(n.startswith("_") for n in i.names if n))  # fmt: skip

    priv = [i for i in imps if private(i) and part_of(i.src) != "__init__"]
    print(f"upward imports: {len(up)}  (layers of tests/arch/test_layers.py)")
    print(f"imports of another part's or family's private module or name: {len(priv)}")

    name_dispatch = []
    table_access = []
    for m, p in mods.items():
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"__name__\s*==\s*[\"']PAG[\"']", line):
                name_dispatch.append(f"{m}:{n}")
            if part_of(m) != "pag" and PRIVATE_TABLES.search(line):
                table_access.append(f"{m}:{n}")
    sdk_private = sorted(
        {i.target + (":" + ",".join(n for n in i.names if n.startswith("_")) if any(n.startswith("_") for n in i.names if n) else "")
         for i in imps if i.src == "perflow.sdk" and ("._" in i.target or any(n.startswith("_") for n in i.names if n))}
    )  # fmt: skip
    print(f'dispatch on __name__ == "PAG": {len(name_dispatch)}')
    print(f"access to _vertices/_metrics/_trace/_executor outside perflow/pag: {len(table_access)} lines")
    print(f"private modules or names imported by perflow/sdk.py: {len(sdk_private)}")

    if args.list:
        print("\n# in-function imports (outside perflow/cli)")
        for i in fn:
            if part_of(i.src) != "cli":
                print(f"  {i.src}:{i.line} -> {i.target}{' (' + ', '.join(i.names) + ')' if i.names != ('',) else ''}")
        print("\n# import circles (run-time imports)")
        for c in full:
            print(f"  {' '.join(c)}{'   [module level]' if c in static else ''}")
        print("\n# upward imports")
        for i in up:
            print(f"  {i.src}:{i.line} -> {i.target}")
        print("\n# private imports across parts or families")
        for i in priv:
            print(f"  {i.src}:{i.line} -> {i.target} {', '.join(n for n in i.names if n)}")
        for title, rows in (("name dispatch", name_dispatch), ("private table access", table_access),
                            ("sdk private imports", sdk_private)):  # fmt: skip
            print(f"\n# {title}")
            for r in rows:
                print(f"  {r}")


if __name__ == "__main__":
    main()
