"""`python -m dvtool` and the `dvtool` console script: the command-line interface.

`run` sets handlers for SIGINT and SIGTERM before anything else is imported: a signal while
dvtool is still starting (nothing done yet) ends it with 130 or 143, one line and no traceback.
`dvtool.cli.main` then takes over (`dvtool.interrupts.command_scope`).
"""

from __future__ import annotations

import signal
import sys
from types import FrameType


def _stopped_while_starting(signum: int, frame: FrameType | None) -> None:
    del frame
    name = signal.Signals(signum).name
    sys.stderr.write(
        f"error: interrupted ({name}) before committing: no commit of this run is in the "
        "table's log\n"
    )
    sys.exit(128 + signum)


def run() -> None:
    """Entry point of the `dvtool` console script and `python -m dvtool`."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _stopped_while_starting)
    from dvtool.cli import main

    main()


if __name__ == "__main__":
    run()
