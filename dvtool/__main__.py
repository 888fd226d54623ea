"""`python -m dvtool` runs the command-line interface."""

from dvtool.cli import main

main()
