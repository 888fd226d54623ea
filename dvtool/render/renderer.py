"""All output of dvtool goes through one renderer, which hands each result to its view.

Commands never print: they return result objects that end up here. `Renderer` is the
`Output` (`dvtool.render.output`: lines, tables, listings or JSON) with one method per
command, each importing only its view (`dvtool.render.inspect`, `rewrites`, `restore`,
`log`, `maintain`; one command runs per process, so the others are never imported), and the
views draw on the `Output`: no view imports this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dvtool.render.output import Output

if TYPE_CHECKING:  # one command runs per process: do not import the others (start-up time)
    from dvtool.commands.checkpoint import CheckpointResult
    from dvtool.commands.delete.command import DeleteResult
    from dvtool.commands.delete.iceberg import IcebergDeleteResult
    from dvtool.commands.downgrade.command import DowngradeResult
    from dvtool.commands.enable import EnableResult
    from dvtool.commands.inspect.command import InspectResult
    from dvtool.commands.inspect.iceberg import IcebergInspectResult
    from dvtool.commands.inspect.paimon import PaimonInspectResult
    from dvtool.commands.inspect.tables import InspectTablesResult
    from dvtool.commands.log_cleanup import LogCleanupResult
    from dvtool.commands.maintain.command import MaintainResult
    from dvtool.commands.manifest import ManifestResult
    from dvtool.commands.optimize.command import OptimizeResult
    from dvtool.commands.optimize.iceberg import IcebergOptimizeResult
    from dvtool.commands.restore.command import RestoreResult
    from dvtool.commands.vacuum.command import VacuumResult
    from dvtool.commands.vacuum.iceberg import IcebergVacuumResult
    from dvtool.commands.vacuum.paimon import PaimonVacuumResult


class Renderer(Output):
    """Draws each command's result with its view, for people or as one JSON document."""

    # -- inspect ---------------------------------------------------------------------------

    def inspect(self, result: InspectResult) -> None:
        from dvtool.render import inspect as view

        if self.as_json:
            self.json(result.to_json())
            return
        if result.summary is not None:
            view.print_summary(self, result.summary)
        if result.files is not None:
            total = result.summary.num_files if result.summary else len(result.files)
            root = result.summary.location if result.summary else None
            view.print_files(self, result.files, total, root)
        if result.history is not None:
            view.print_history(self, result.history)
        if result.verify is not None:
            view.print_verify(self, result.verify)
        if result.checks is not None:
            view.print_checks(self, result.checks)

    def inspect_iceberg(self, result: IcebergInspectResult) -> None:
        from dvtool.render import inspect_iceberg as view

        view.show(self, result)

    def inspect_paimon(self, result: PaimonInspectResult) -> None:
        from dvtool.render import inspect_paimon as view

        view.show(self, result)

    def inspect_tables(
        self,
        result: InspectTablesResult,
        shown: Callable[[str], str] | None = None,
        title: str = "Tables",
    ) -> None:
        """`inspect --recursive`; `shown(location)`: a table as the user named it (relative
        to the prefix), default as the result holds it."""
        from dvtool.render.inspect_tables import render_inspect_tables

        render_inspect_tables(self, result, shown or (lambda location: location), title)

    # -- the other commands (their views: rewrites, restore, log, maintain) --------------------

    def enable(self, result: EnableResult) -> None:
        from dvtool.render import rewrites as render_rewrites

        render_rewrites.enable(self, result)

    def delete(self, result: DeleteResult) -> None:
        from dvtool.render import rewrites as render_rewrites

        render_rewrites.delete(self, result)

    def delete_iceberg(self, result: IcebergDeleteResult) -> None:
        from dvtool.render import iceberg_rewrites as view

        view.delete(self, result)

    def optimize(self, result: OptimizeResult) -> None:
        from dvtool.render import rewrites as render_rewrites

        render_rewrites.optimize(self, result)

    def optimize_iceberg(self, result: IcebergOptimizeResult) -> None:
        from dvtool.render import iceberg_rewrites as view

        view.optimize(self, result)

    def manifest(self, result: ManifestResult) -> None:
        from dvtool.render import rewrites as render_rewrites

        render_rewrites.manifest(self, result)

    def downgrade(self, result: DowngradeResult) -> None:
        from dvtool.render import rewrites as render_rewrites

        render_rewrites.downgrade(self, result)

    def restore(self, result: RestoreResult) -> None:
        from dvtool.render.restore import render_restore

        render_restore(self, result)

    def vacuum(self, result: VacuumResult) -> None:
        from dvtool.render import log as render_log

        render_log.vacuum(self, result)

    def vacuum_iceberg(self, result: IcebergVacuumResult) -> None:
        from dvtool.render import vacuum_iceberg as view

        view.show(self, result)

    def vacuum_paimon(self, result: PaimonVacuumResult) -> None:
        from dvtool.render import vacuum_paimon as view

        view.show(self, result)

    def log_cleanup(self, result: LogCleanupResult) -> None:
        from dvtool.render import (
            log as render_log,  # checkpoint and vacuum --log views (dvtool.render.log)
        )

        render_log.log_cleanup(self, result)

    def checkpoint(self, result: CheckpointResult) -> None:
        from dvtool.render import log as render_log

        render_log.checkpoint(self, result)

    def maintain(self, result: MaintainResult, shown: Callable[[str], str] | None = None) -> None:
        """`shown(location)`: a table's location as the user named it (see
        `dvtool.render.values.location_as_given`); default: as the result holds it."""
        from dvtool.render.maintain import render_maintain

        render_maintain(self, result, shown or (lambda location: location))
