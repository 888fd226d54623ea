"""The hostile and broken input corpus: tables, logs, DVs, paths and arguments that dvtool
must refuse with a clear, located error (see cases.py), and the few that it must read
correctly instead (see test_hostile_input.py)."""
