"""Format libraries that a reader and a writer of one format share (below both; see docs/architecture.md).

A reader (:mod:`perflow.readers`) and a writer (:mod:`perflow.writers`) of
the same format never import each other: what both need lives here.
:mod:`perflow.codecs.otf2` drives the OTF2 C library of the ``otf2`` wheel:
its bindings (:mod:`~perflow.codecs.otf2.capi`, used by the decoder and the
writer) and the archive writer (:mod:`~perflow.codecs.otf2.archive` with
its compiled event loops, :mod:`~perflow.codecs.otf2.wkernel`).
"""
