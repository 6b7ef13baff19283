"""The profile of a run in the page: Cube's three linked panes and hpcviewer's three views (HTML).

* the **metric tree**: time, split into computation, point-to-point, collective, synchronisation,
  other MPI, I/O, GPU and idle, each split into the wait states found at its calls (Late Sender,
  Wait at N x N, ...); then visits and the run's other metrics (bytes, hardware counters; a
  minimum or maximum such as Score-P's ``min_time`` aggregates as one, never summed);
* the **call tree** of the selected metric, in three views of the same values: top-down (the
  calling-context tree), bottom-up (each function, then its callers, then theirs: where the
  time of a function comes from) and flat (each function once, recursion counted once, then its
  call paths); inclusive and exclusive columns, aggregated over locations by sum, mean, max or
  min; a click on a column header colours and selects by it;
* the **system tree** (hosts, processes, threads and GPU streams) with the selected call path's
  value on every location, and a strip of all locations above it (min, mean, max and where);
* a **source pane**: the lines around the selected call path's ``file:line``, when the source
  file was readable when the page was written.

Selecting a metric colours the call tree; selecting a call path shows its distribution over the
system tree, as in Cube. The data is :func:`perflow.passes._panes.panes_data`; the script is
``_web/panes.js``. ``window.pfPanes.selectVertex(id)`` selects a call path from elsewhere in
the page (the findings).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pandas as pd

from perflow.sdk import PAG

from ._panes import panes_data

__all__ = ["profile_html", "web_asset", "PANES_JS"]

_WEB = Path(__file__).with_name("_web")


def web_asset(name: str) -> str:
    """The text of one of the page's own scripts or styles (``perflow/passes/_web/NAME``)."""
    return (_WEB / name).read_text(encoding="utf-8")


PANES_JS = "panes.js"


def json_script(obj: Any, element_id: str) -> str:
    """``obj`` as JSON in a ``<script type="application/json">`` (safe inside HTML)."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False, default=str)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def profile_html(pag: PAG, waits: pd.DataFrame | None = None, **options: Any) -> str:
    """The panes of ``pag`` as an HTML fragment (their data included; the page adds :data:`PANES_JS`).

    Parameters
    ----------
    pag : PAG
    waits : DataFrame, optional
        Wait-state instances: the wait states of the metric tree.
    **options
        Passed to :func:`perflow.passes._panes.panes_data` (``max_vertices``, ...).
    """
    data = panes_data(pag, waits, **options)
    esc = html.escape
    folded = (
        f'<p class="pf-note">{data["folded"]} smaller call paths are folded into "(N more call paths)" lines.</p>'
        if data["folded"]
        else ""
    )
    n_loc = data["n_locations"]
    return f"""<div class="pf-panes" id="pf-panes">
<div class="pf-bar">
<label>aggregate over the {n_loc} location{"s" if n_loc != 1 else ""}: <select id="pf-agg">
<option value="sum" selected>sum</option><option value="mean">mean</option><option value="max">max</option><option value="min">min</option>
</select></label>
<span id="pf-selinfo"></span>
</div>
<div class="pf-cols">
<div class="pf-pane"><h3>Metric</h3><div class="pf-list" id="pf-metrics"></div></div>
<div class="pf-pane"><h3><span id="pf-call-title">call tree</span> <span class="pf-tabs">
<button data-view="top" class="pf-on">top-down</button><button data-view="bottom">bottom-up</button><button data-view="flat">flat</button>
</span></h3><div class="pf-list" id="pf-calls">{esc("loading...")}</div></div>
<div class="pf-pane"><h3 id="pf-system-title">System</h3><canvas id="pf-dist" title="every location; click one"></canvas>
<div class="pf-dist-info" id="pf-dist-info"></div><div class="pf-list" id="pf-system" style="height:290px"></div></div>
</div>
<div class="pf-source" id="pf-source"></div>
{folded}
{json_script(data, "pf-panes-data")}
</div>"""
