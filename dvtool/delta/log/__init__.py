"""Delta's log over storage: reading and replaying `_delta_log` into snapshots, atomic
commits (the one commit path), checkpoints, metadata cleanup, symlink manifests.
"""
