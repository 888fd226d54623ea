"""Generate shell completion scripts for dvtool into completions/ (bash, zsh, fish).

Click produces them from the CLI definition; tests/test_completions.py checks they are
current. Run after changing commands or options: python scripts/gen_completions.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from click.shell_completion import get_completion_class

from dvtool.cli import cli
from dvtool.shell_completion import COMPLETE_VAR, register

SHELLS = {"bash": "dvtool.bash", "zsh": "_dvtool", "fish": "dvtool.fish"}


def completion_script(shell: str) -> str:
    """The completion script click generates for `shell`."""
    register()
    cls = get_completion_class(shell)
    if cls is None:
        raise ValueError(f"click has no completion for {shell}")
    return cls(cli, {}, "dvtool", COMPLETE_VAR).source()


def main(out_dir: Path) -> None:
    out_dir.mkdir(exist_ok=True)
    for shell, name in SHELLS.items():
        (out_dir / name).write_text(completion_script(shell))
        print(f"wrote {out_dir / name}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent.parent / "completions")
