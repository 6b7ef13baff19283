"""Tables for a terminal: every column kept, long call paths shortened in the middle, wide tables wrapped.

``perflow run`` prints a flow's reports (Markdown, with aligned-text tables in code blocks) and
small tables. A table wider than the terminal is fitted in two steps, and no column is ever left out:

1. long text cells are shortened in the middle: call paths keep their first frame and as many of
   their last frames (and the ``(file:line)`` of a call site) as fit, ``main/…/exchange/MPI_Send
   (cg.f:906)``; other long text keeps its start and end, ``saxpy(double *, d…int)``;
2. if the table is still too wide, its columns are wrapped into parts that fit, each part
   repeating the columns that identify a row (the first one, and the next when the first does not
   tell the rows apart), as pandas does with a wide frame.

A note under a fitted table says what was done, and that ``--output DIR`` writes the full table.
The cells are shown as they are otherwise: numbers are formatted before (:mod:`perflow.units`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["fit_table", "fit_text", "shorten_path", "shorten_middle", "shorten_end", "shorten_site", "ELLIPSIS"]

ELLIPSIS = "…"
#: Text columns are never shortened below this many characters (a table is wrapped instead).
MIN_TEXT = 24
_SITE = re.compile(r"^(.*?)( \([^()]*:\d+\))$")  # "... (file.c:12)": the call site of a call path
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_MD_RULE = re.compile(r"^\|(\s*:?-{1,}:?\s*\|)+\s*$")
_TEXT_RULE = re.compile(r"^-+(  -+)*$")


def shorten_end(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters at a word boundary when one is near, ending in ``…``."""
    if len(text) <= width:
        return text
    cut = text[: max(width - 1, 0)]
    space = cut.rfind(" ")
    if space >= width * 0.6:
        cut = cut[:space].rstrip(" ,;:")
    return cut + ELLIPSIS


def shorten_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by replacing its middle with ``…``."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = (width - 1 + 1) // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def shorten_path(path: str, width: int) -> str:
    """A call path cut to ``width`` characters: the first frame, ``…``, the last frames that fit.

    ``main/solve/exchange/MPI_Send (cg.f:906)`` at 26 characters is ``main/…/MPI_Send (cg.f:906)``.
    A path with at most two frames, or whose last frame alone does not fit, is cut in the middle.
    """
    if len(path) <= width:
        return path
    m = _SITE.match(path)
    core, site = (m.group(1), m.group(2)) if m else (path, "")
    parts = core.split("/")
    if len(parts) < 3:
        return shorten_middle(path, width)
    kept: list[str] = []
    for part in reversed(parts[1:]):
        trial = "/".join([parts[0], ELLIPSIS, part, *kept]) + site
        if len(trial) > width:
            break
        kept.insert(0, part)
    if not kept:
        return shorten_middle(path, width)
    return "/".join([parts[0], ELLIPSIS, *kept]) + site


def _is_path_column(header: str, cells: Sequence[str]) -> bool:
    if "path" in header.lower():
        return True
    with_slash = sum(1 for c in cells if "/" in c)
    return bool(cells) and with_slash >= 0.5 * len(cells)


def shorten_site(text: str, width: int) -> str:
    """``name (file:line)`` cut in the file's name: ``compute (…etic.c:50)``; else in the middle."""
    m = _SITE.match(text)
    if len(text) <= width or not m:
        return shorten_middle(text, width)
    name, site = m.group(1), m.group(2)[2:-1]  # "file:line"
    room = width - len(name) - 4  # " (" + "…" + ")"
    if room < 4:
        return shorten_middle(text, width)
    return f"{name} ({ELLIPSIS}{site[-room:]})"


def _shorten(header: str, cells: list[str], width: int) -> list[str]:
    """Call paths keep both ends; ``name (file:line)`` its name and line; prose (several words) its start."""
    if _is_path_column(header, cells):
        return [shorten_path(c, width) for c in cells]
    return [
        shorten_site(c, width)
        if _SITE.match(c)
        else (shorten_end(c, width) if c.count(" ") >= 2 else shorten_middle(c, width))
        for c in cells
    ]


def _render(header: list[str], rows: list[list[str]], right: list[bool], style: str) -> list[str]:
    least = 3 if style == "markdown" else 1  # a Markdown rule needs ":--" at least
    widths = [max([len(h), least] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def pad(v: str, w: int, r: bool) -> str:
        return v.rjust(w) if r else v.ljust(w)

    if style == "markdown":
        out = ["| " + " | ".join(pad(h, w, False) for h, w in zip(header, widths)) + " |"]
        out.append(
            "| "
            + " | ".join(("-" * (w - 1) + ":") if r else (":" + "-" * (w - 1)) for w, r in zip(widths, right))
            + " |"
        )
        out += ["| " + " | ".join(pad(v, w, r) for v, w, r in zip(row, widths, right)) + " |" for row in rows]
        return out
    out = ["  ".join(pad(h, w, r) for h, w, r in zip(header, widths, right)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(pad(v, w, r) for v, w, r in zip(row, widths, right)).rstrip() for row in rows]
    return out


def _total(widths: Sequence[int], style: str) -> int:
    if not widths:
        return 0
    return (sum(widths) + 3 * len(widths) + 1) if style == "markdown" else (sum(widths) + 2 * (len(widths) - 1))


def _key_columns(header: list[str], rows: list[list[str]], widths: list[int], width: int) -> list[int]:
    """The columns each wrapped part repeats: the first, and a name beside it.

    The name is the first text column among the next two when the first column is a number (a
    vertex id reads better with its name), else the second column when the first repeats a value.
    """
    keys = [0]
    numeric_first = all(re.fullmatch(r"-?[0-9][0-9,.]*", r[0] or "0") for r in rows)
    nxt = [i for i in (1, 2) if i < len(header) - 1]
    named = [i for i in nxt if not all(re.fullmatch(r"-?[0-9][0-9,.]*", r[i] or "0") for r in rows)]
    if numeric_first and named:
        keys.append(named[0])
    elif nxt and len({r[0] for r in rows}) < len(rows):
        keys.append(nxt[0])
    while len(keys) > 1 and sum(widths[k] + 3 for k in keys) > width // 2:
        keys.pop()
    return keys


def fit_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: Sequence[bool],
    width: int,
    *,
    style: str = "markdown",
) -> list[str]:
    """The lines of a table fitted to ``width`` characters (see the module docstring).

    Parameters
    ----------
    header : list of str
        Column headers.
    rows : list of list of str
        Formatted cells, one list per row.
    right : list of bool
        Right-align the column (numbers).
    width : int
        Characters per line.
    style : {"markdown", "text"}
        ``| a | b |`` rows with a ``| :--- | ---: |`` rule, or columns two spaces apart under a
        ``----  ----`` rule (:func:`perflow.passes.report.render_table`'s text form).

    Returns
    -------
    list of str
        The table (one or several parts), then a note when cells were shortened or columns wrapped.
    """
    header = [str(h) for h in header]
    rows = [[str(c) for c in r] + [""] * (len(header) - len(r)) for r in rows]
    rows = [r[: len(header)] for r in rows]
    right = list(right) + [False] * (len(header) - len(right))
    cols = [[r[i] for r in rows] for i in range(len(header))]
    widths = [max([len(h)] + [len(c) for c in col]) for h, col in zip(header, cols)]
    if _total(widths, style) <= width or not header:
        return _render(header, rows, right, style)
    notes: list[str] = []
    # 1. shorten long text cells, the widest column first, down to MIN_TEXT (or the header)
    text_cols = [i for i in range(len(header)) if not right[i]]
    floor = {i: max(MIN_TEXT, len(header[i])) for i in text_cols}
    cap = max((widths[i] for i in text_cols), default=0)
    budget_cap = cap
    while budget_cap > MIN_TEXT:
        trial = [min(w, max(budget_cap, floor[i])) if i in floor else w for i, w in enumerate(widths)]
        if _total(trial, style) <= width:
            break
        budget_cap -= 1
    # shorten to the cap that fits; when nothing fits, to a third of the width (wrapping does the rest)
    if _total([min(w, max(budget_cap, floor[i])) if i in floor else w for i, w in enumerate(widths)], style) > width:
        budget_cap = max(budget_cap, width // 3)
    shortened = False
    for i in text_cols:
        limit = max(budget_cap, floor[i])
        if widths[i] > limit:
            cols[i] = _shorten(header[i], cols[i], limit)
            widths[i] = max([len(header[i])] + [len(c) for c in cols[i]])
            shortened = True
    rows = [list(r) for r in zip(*cols)] if cols else rows
    if shortened:
        notes.append("long cells shortened (…)")
    if _total(widths, style) <= width:
        out = _render(header, rows, right, style)
    else:
        # 2. wrap the columns into parts, each repeating the key columns
        keys = _key_columns(header, rows, widths, width)
        rest = [i for i in range(len(header)) if i not in keys]
        parts: list[list[int]] = []
        cur: list[int] = []
        for i in rest:
            if cur and _total([widths[k] for k in keys + cur + [i]], style) > width:
                parts.append(cur)
                cur = []
            cur.append(i)
        if cur:
            parts.append(cur)
        out = []
        for n, part in enumerate(parts):
            idx = keys + part
            if n:
                out.append("")
                out.append(f"(part {n + 1} of {len(parts)}: {', '.join(header[i] for i in part)})")
            out += _render(
                [header[i] for i in idx], [[r[i] for i in idx] for r in rows], [right[i] for i in idx], style
            )
        notes.append(f"columns wrapped into {len(parts)} parts")
    out.append(f"({'; '.join(notes)} to fit {width} characters; --output DIR writes the full table)")
    return out


def _md_block(block: list[str], width: int) -> list[str]:
    rows = [[c.strip() for c in _CELL_SPLIT.split(b.strip())[1:-1]] for b in block]
    if len(rows) < 2 or not _MD_RULE.match(block[1].strip()):
        return block
    header, rule, body = rows[0], rows[1], rows[2:]
    right = [r.endswith(":") and not r.startswith(":") for r in rule]
    return fit_table(header, body, right, width, style="markdown")


def _in_text_table(line: str, rule: str) -> bool:
    """Whether ``line`` is a row under the ``----  ----`` rule: no longer, blank where the rule is."""
    if not line.strip() or len(line) > len(rule) or line.startswith(("```", "... ")):
        return False
    return all(line[k] == " " for k in range(min(len(line), len(rule))) if rule[k] == " ")


def _text_block(lines: list[str], width: int) -> list[str]:
    """An aligned-text table (header, ``----  ----`` rule, rows) re-fitted: columns come from the rule."""
    head, rule, body = lines[0], lines[1], lines[2:]
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]

    def cells(line: str) -> list[str]:
        ends = [s for s, _ in spans[1:]] + [len(line)]
        return [line[s:stop].strip() for (s, _), stop in zip(spans, ends)]

    header = cells(head)
    rows = [cells(b) for b in body]
    right = []
    for s, e in spans:
        vals = [b[s:e] for b in body if b[s:e].strip()]
        right.append(
            bool(vals)
            and all(v.endswith(v.strip()) and v[-1:] != " " for v in vals)
            and any(v[:1] == " " for v in vals)
        )
    return fit_table(header, rows, right, width, style="text")


def fit_text(text: str, width: int) -> str:
    """Every table in ``text`` (Markdown tables, aligned-text tables) fitted to ``width``; other lines kept.

    Markdown tables are also aligned (their columns padded), which keeps them valid Markdown.
    A data URI image (``![alt](data:image/png;base64,...)``) is shown as ``[figure: alt]``.
    """
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out += _md_block(lines[i:j], width)
            i = j
            continue
        if i + 1 < len(lines) and ln.strip() and _TEXT_RULE.match(lines[i + 1]) and len(lines[i + 1]) > 2:
            j = i + 2
            while j < len(lines) and _in_text_table(lines[j], lines[i + 1]):
                j += 1
            block = lines[i:j]
            if max(len(b) for b in block) > width:
                out += _text_block(block, width)
            else:
                out += block
            i = j
            continue
        out.append(_DATA_IMAGE.sub(lambda m: f"[figure: {m.group(1) or 'figure'}]", ln))
        i += 1
    return "\n".join(out)


_DATA_IMAGE = re.compile(r"!\[([^\]]*)\]\(data:[^)]*\)")
