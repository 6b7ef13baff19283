"""The matplotlib ``Figure`` subclass every plot pass returns: it displays itself in notebooks.

IPython shows an object's ``_repr_png_`` when no formatter is registered for its type, so a
figure made by a pass displays as the last expression of a cell without ``%matplotlib inline``
(with the inline backend active, its formatter draws the figure instead: the same picture).
Imported only when a figure is made: importing this module imports matplotlib.
"""

from __future__ import annotations

import io

from matplotlib.figure import Figure

__all__ = ["PerflowFigure", "figure_png"]


def figure_png(fig: Figure, *, dpi: float | None = None) -> bytes:
    """The figure as PNG bytes (tight bounding box)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi or fig.dpi, bbox_inches="tight")
    return buf.getvalue()


class PerflowFigure(Figure):
    """A matplotlib Figure with a PNG representation for IPython (``_repr_png_``)."""

    def _repr_png_(self) -> bytes:
        return figure_png(self)
