"""`dvtool inspect`: summary (`summary`, `columns`), files, history, `--verify` (`command`)
and `--check` gates (`checks`).
"""
