"""Input and output passes: read performance data into a PAG, save and load PAGs, synthetic runs."""

from __future__ import annotations

from pathlib import Path

from perflow.sdk import PAG, output_path, pass_
from perflow.sdk.io import current_engine
from perflow.sdk.io import load as load_pag
from perflow.sdk.io import read as read_any
from perflow.sdk.io import synthetic as syn

__all__ = ["read", "load", "save_pag", "synthetic"]


@pass_(version="1", tags=("io",))
def read(path: Path, *, format: str | None = None) -> PAG:  # noqa: A002
    """Read a trace, profile or saved PAG into a PAG (any supported format).

    Parameters
    ----------
    path
        The file or directory written by the measurement tool.
    format
        Force a format instead of detecting it (see ``perflow info``).
    """

    return read_any(path, format=format, engine=current_engine())


@pass_(version="1", tags=("io",))
def load(path: Path) -> PAG:
    """Load a PAG saved with ``save_pag`` (or ``PAG.save``).

    Parameters
    ----------
    path
        The saved PAG directory.
    """

    return load_pag(path)


@pass_(version="1", cacheable=False, tags=("io",))
def save_pag(pag: PAG, *, path: str) -> str:
    """Save a PAG to a directory (atomically) and return the directory.

    Parameters
    ----------
    pag
        The PAG to save.
    path
        Where to save it (conventionally ``*.pag``); an existing saved PAG there is replaced. Under a
        flow run, relative to the run's output folder (see ``perflow.flow.writes``).
    """

    return str(pag.save(output_path(path) or path))


@pass_(version="1", tags=("io",))
def synthetic(
    *,
    nprocs: int = 8,
    iterations: int = 10,
    seed: int = 0,
    imbalance: float = 0.0,
    slow_rank: int | None = None,
    late_sender: float = 0.0,
) -> PAG:
    """A synthetic MPI-like trace (see ``perflow.synthetic.trace``): sample data without files.

    Parameters
    ----------
    nprocs
        Number of processes.
    iterations
        Number of time steps.
    seed
        Seed of the random generator: same seed, same trace.
    imbalance
        Linear load imbalance across ranks.
    slow_rank
        A rank whose compute takes twice as long.
    late_sender
        Probability per iteration and rank of a late send.
    """

    return syn.trace(
        nprocs=nprocs,
        iterations=iterations,
        seed=seed,
        imbalance=imbalance,
        slow_rank=slow_rank,
        late_sender=late_sender,
    )
