"""promcp.analysis — load traces into pandas and compute attribution tables."""
