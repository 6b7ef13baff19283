"""OTF2 through the C library of the ``otf2`` wheel: the bindings (``capi``), the archive writer (``archive``, ``wkernel``)."""
