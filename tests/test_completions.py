"""The shipped completion scripts match what the CLI generates today."""

from __future__ import annotations

import importlib.util
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
