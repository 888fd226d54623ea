"""Delta Lake: the pure protocol (`protocol/`), the log (`log/`: reading, replay into
snapshots, atomic commits, checkpoints, cleanup) and the DV store (`dvstore`: DV files and
inline DVs of a table).

A format package: it never imports another format package or the commands.
"""
