"""The matplotlib ``Figure`` subclass every plot pass returns: it displays itself in notebooks.

IPython shows an object's ``_repr_png_`` when no formatter is registered for its type, so a
figure made by a pass displays as the last expression of a cell without ``%matplotlib inline``
(with the inline backend active, its formatter draws the figure instead: the same picture).
Imported only when a figure is made (:func:`perflow.sdk.figures.new_figure`): importing this
module imports matplotlib.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from .render import figure_png

__all__ = ["PerflowFigure", "figure_png"]


class PerflowFigure(Figure):
    """A matplotlib Figure with a PNG representation for IPython (``_repr_png_``)."""

    def _repr_png_(self) -> bytes:
        return figure_png(self)
