"""perflow: a programmable performance-analysis framework for parallel programs."""

__version__ = "0.1.0"
