"""perflow's recorder for Python programs, run as ``python -m perflow_pyrec`` (standard library only).

Imported as a top-level package from ``perflow/recorder/pyrt`` (put on
``PYTHONPATH`` by ``perflow record``), so that the recorded program does not
import perflow itself.
"""
