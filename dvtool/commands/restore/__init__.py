"""`dvtool restore`: commit an earlier version's state (`command`), planned by `plan`."""
