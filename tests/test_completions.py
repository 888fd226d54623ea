"""The shipped completion scripts match what the CLI generates today."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location(
    "gen_completions", ROOT / "scripts/gen_completions.py"
)
assert spec and spec.loader
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)


@pytest.mark.parametrize("shell", sorted(gen.SHELLS))
def test_completion_script_is_current(shell: str) -> None:
    shipped = (ROOT / "completions" / gen.SHELLS[shell]).read_text()
    assert shipped == gen.completion_script(shell), "run: python scripts/gen_completions.py"
    assert "_DVTOOL_COMPLETE" in shipped


def _complete(shell: str, words: str, current: str) -> list[str]:
    """What dvtool answers a `shell` completion request (as the shipped scripts ask)."""
    env = {
        **os.environ,
        "_DVTOOL_COMPLETE": f"{shell}_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": current,
    }
    done = subprocess.run(
        [sys.executable, "-m", "dvtool"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize(("shell", "current"), [("bash", "2"), ("zsh", "3"), ("fish", "")])
def test_table_completes_as_a_path(shell: str, current: str) -> None:
    answers = _complete(shell, "dvtool inspect ", current)
    assert answers and answers[0].startswith("file"), answers


def test_fish_keeps_whole_descriptions() -> None:
    """click's fish script cut a description at its first comma; ours splits only once."""
    shipped = (ROOT / "completions" / "dvtool.fish").read_text()
    assert '(string split -m 1 "," $completion)' in shipped
    answers = _complete("fish", "dvtool delete x --", "--")
    storage = next(a for a in answers if a.startswith("plain,--storage-option"))
    value_and_help = storage.split(",", 1)[1]  # what the shipped script does
    assert value_and_help.endswith('see README "Storage options". Repeatable.')
    assert "AWS_REGION, AWS_ENDPOINT_URL" in value_and_help


@pytest.mark.parametrize(
    ("shell", "words", "current"),
    [
        ("bash", "dvtool inspect t --check ", "4"),
        ("zsh", "dvtool inspect t --check max-f", "4"),
        ("fish", "dvtool inspect t --check max-f", "max-f"),
    ],
)
def test_check_completes_the_gate_names(shell: str, words: str, current: str) -> None:
    """`--check <TAB>` offers the gates (`max-deleted-ratio=`, ...), each ready for its limit."""
    from dvtool.commands.inspect.checks import CHECK_NAMES

    answers = "\n".join(_complete(shell, words, current))
    wanted = [n for n in CHECK_NAMES if shell == "bash" or n.startswith("max-f")]
    assert wanted and all(f"{name}=" in answers for name in wanted), answers
    if shell != "bash":
        assert "max-deleted-ratio=" not in answers
