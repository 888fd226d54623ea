"""Where local paths really lead, symbolic links resolved, for many paths at one stat each.

Before a writing command rewrites or removes files, it checks that each one really lies
inside the table root: `..` segments aside, a symbolic link anywhere on the path (a linked
directory inside the table pointing elsewhere, a linked file) may lead out of it. The check
used to call `os.path.realpath` on the file and on the root, for every file: that is one
`lstat` per component of both paths, ~23 calls a file for the data file and DV file of a
table in a directory five levels deep, over 100,000 calls for 5,000 files.

`RealPaths` gives the same answers at about one `lstat` per path: it remembers the real
path of every directory it resolved (not of the paths asked about, so memory grows with the
directories, not the files), and resolves a path as its parent's real path joined with its
last name, which it `lstat`s there: exactly the step `realpath` takes for that component.
When that name is itself a link, the path is resolved by `os.path.realpath` from scratch,
so links (chains, loops, links back inside) get exactly `realpath`'s treatment; so do paths
it cannot split (`/`, relative ones). What it resolved is kept for its lifetime: a link
changed meanwhile is not seen, so a check makes a new one.
"""

from __future__ import annotations

import os
import stat

from dvtool.storage.locations import path_under

__all__ = ["RealPaths"]


class RealPaths:
    """Real paths of local paths and their place under a root, each directory resolved once."""

    def __init__(self, root_path: str) -> None:
        """`root_path`: the root's absolute path, links in it not resolved yet."""
        self._known: dict[str, str] = {}
        self._root_path = root_path
        self._real_root: str | None = None

    def under_root(self, path: str) -> str | None:
        """The `/`-separated path under the root of `path` ("" for the root itself), both
        with symbolic links resolved, or None when `path` really lies outside the root."""
        if self._real_root is None:
            real_root = self._known[self._root_path] = self.real_path(self._root_path)
            self._real_root = real_root.replace(os.sep, "/")
        return path_under(self.real_path(path).replace(os.sep, "/"), self._real_root)

    def real_path(self, path: str) -> str:
        """`os.path.realpath(path)`, built on the real paths of its directories known so far."""
        known = self._known
        unresolved: list[tuple[str, str]] = []  # (path, its last name), `path` first
        current = path
        while (real := known.get(current)) is None:
            parent, name = os.path.split(current)
            if name in ("", os.curdir, os.pardir) or parent in ("", current):
                # Not a plain name under a directory (`/`, `..`, relative): from scratch.
                real = os.path.realpath(current)
                break
            unresolved.append((current, name))
            current = parent
        # `real` is the real path of `current`, the directory of the last of `unresolved`.
        if current != path:
            known[current] = real
        for entry, name in reversed(unresolved):
            candidate = os.path.join(real, name)
            try:
                is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
            except OSError:
                is_link = False  # missing or unreachable: realpath keeps the name as it is
            real = os.path.realpath(entry) if is_link else candidate
            if entry != path:
                known[entry] = real  # directories only: a table has far fewer of them
        return real
