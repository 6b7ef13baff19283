"""HPCToolkit databases: the classic layout (``experiment.xml`` + ``*.metric-db``) and v4 (``meta.db``, ...).

See :mod:`perflow.readers.hpctoolkit.classic` and :mod:`perflow.readers.hpctoolkit.v4`
for what is read and how it maps onto a PAG.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import FormatError
from ...pag.pag import PAG
from .._common import head_bytes, reader_errors
from .classic import read_classic
from .v4 import read_v4

FORMAT = "hpctoolkit"
DESCRIPTION = "HPCToolkit databases (experiment.xml + metric-db, or v4 meta.db/profile.db/trace.db)"

__all__ = ["FORMAT", "DESCRIPTION", "detect", "read"]


def _dir(path: Path) -> Path:
    return path if path.is_dir() else path.parent


def detect(path: Path) -> bool:
    """A database directory (or one of its files) with experiment.xml or meta.db."""
    d = _dir(path)
    if (
        path.is_file()
        and path.name not in ("experiment.xml", "meta.db", "profile.db", "cct.db", "trace.db")
        and not path.name.endswith(".metric-db")
    ):
        return False
    if (d / "meta.db").is_file():
        return head_bytes(d / "meta.db", 14) == b"HPCTOOLKITmeta"
    if (d / "experiment.xml").is_file():
        return b"HPCToolkitExperiment" in head_bytes(d / "experiment.xml", 512)
    return False


def read(path: Path, *, mode: str = "auto", **options: Any) -> PAG:
    """Read an HPCToolkit database.

    Parameters
    ----------
    path : Path
        The database directory (or a file inside it).
    mode : {"auto", "profile", "trace"}
        For v4 databases: read ``trace.db`` as a trace (``auto`` does when it
        exists) or the profile from ``profile.db``. Classic databases are
        always profiles.

    Returns
    -------
    PAG
    """
    if options:
        raise TypeError(f"the HPCToolkit reader takes mode only (got {', '.join(options)})")
    if mode not in ("auto", "profile", "trace"):
        raise ValueError(f"mode must be 'auto', 'profile' or 'trace', not {mode!r}")
    d = _dir(Path(path))
    if (d / "meta.db").is_file():
        with reader_errors(d, "HPCToolkit v4 database"):
            return read_v4(d, mode)
    if (d / "experiment.xml").is_file():
        if mode == "trace":
            raise FormatError(d, "classic (experiment.xml) databases are read as profiles only")
        with reader_errors(d, "HPCToolkit database"):
            return read_classic(d)
    raise FormatError(d, "no experiment.xml or meta.db: not an HPCToolkit database")
