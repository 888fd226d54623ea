"""`tests.shared_builds`: processes of one run that ask for the same build at once get one
build; a build that failed is built again by the next process to ask."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import shared_builds

REPO = Path(__file__).resolve().parent.parent

ASK = """
import sys, time
from pathlib import Path
from tests import shared_builds

shared_builds.SHARED_ROOT = Path(sys.argv[1])

def build(folder):
    folder.mkdir()
    with (Path(sys.argv[1]) / "builds.log").open("a") as log:
        log.write("built\\n")
    time.sleep(1)  # the other process asks meanwhile
    (folder / "out.txt").write_text("done")

print(shared_builds.shared_build("thing", build))
"""


def test_processes_asking_at_once_share_one_build(tmp_path: Path) -> None:
    command = [sys.executable, "-c", ASK, str(tmp_path)]
    asking = [
        subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    folders = {p.communicate(timeout=60)[0].strip() for p in asking}
    assert [p.returncode for p in asking] == [0, 0]
    assert folders == {str(tmp_path / "shared-builds" / "thing")}
    assert (tmp_path / "shared-builds" / "thing" / "out.txt").read_text() == "done"
    assert (tmp_path / "builds.log").read_text() == "built\n"


def test_a_failed_build_is_built_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared_builds, "SHARED_ROOT", tmp_path)
    monkeypatch.setattr(shared_builds, "_built", {})

    def fails(folder: Path) -> None:
        folder.mkdir()
        (folder / "half.txt").write_text("half")
        raise RuntimeError("the engine failed")

    with pytest.raises(RuntimeError, match="the engine failed"):
        shared_builds.shared_build("thing", fails)
    folder = shared_builds.shared_build("thing", lambda f: f.mkdir())
    assert sorted(p.name for p in folder.iterdir()) == [".built"]  # no leftovers
