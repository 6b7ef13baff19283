"""A tiny perflow plug-in: a reader, a pass with a partitioned analysis, a flow library and an engine."""
