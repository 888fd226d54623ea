"""Delta's protocol, purely: actions, log file names, replay, table features, statistics,
checkpoints, commits and conflicts, the DV descriptor. No IO, no fsspec/pyspark imports.
"""
