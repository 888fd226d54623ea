"""The `dvtool` subcommands as click commands, registered on the group in `dvtool.cli`.

Each parses its options, calls the command function in `dvtool.commands` and hands the result
to `dvtool.render.renderer`; none holds logic of its own.
"""
