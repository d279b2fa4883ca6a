"""Experiments at scale: an experiment file expanded into replays (spec), run on Dask (sweep),
turned into an HTML page with figures (report)."""
