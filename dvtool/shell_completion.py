"""Shell completion: click's own, with fish's option descriptions kept whole.

The scripts in completions/ (bash, zsh, fish) call `dvtool` back with `_DVTOOL_COMPLETE`
set; click answers from the command definitions (TABLE completes as a local path, options
with their help). click's fish script splits each answer `type,value<TAB>help` at every
comma, so a description with a comma was cut there; `FishCompletion` splits at the first.
"""

from __future__ import annotations

from click.shell_completion import FishComplete, add_completion_class

COMPLETE_VAR = "_DVTOOL_COMPLETE"


class FishCompletion(FishComplete):
    """click's fish completion, splitting each answer at its first comma only."""

    source_template = FishComplete.source_template.replace(
        '(string split "," $completion)', '(string split -m 1 "," $completion)'
    )


def register() -> None:
    """Make `FishCompletion` the `fish` completion of every click command."""
    add_completion_class(FishCompletion, "fish")
