"""Entry script for spark-submit: runs the dvtool CLI in the driver spark-submit starts.

    spark-submit --master URL [--deploy-mode cluster] [--conf ...] \\
        "$(python -c 'import dvtool.spark_submit as m; print(m.__file__)')" \\
        optimize s3://bucket/table --purge

The arguments after the script are dvtool's (`python -m dvtool` semantics). PySpark's
gateway in the driver's environment tells dvtool that spark-submit started it
(`dvtool.engines.in_spark_driver`): `--engine spark` and `auto` then run on the session of
spark-submit's JVM - its master, deploy mode and confs, no `--spark-master` needed - and
dvtool ships its own package to it. The driver needs dvtool installed (or on `--py-files`);
the executors only pyarrow and numpy. The session is stopped when the command ends, and the
process exits with the command's exit code.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and sys.path:
    # Run as a file from dvtool's package directory, Python put that directory first on
    # sys.path, where dvtool's modules would shadow top-level ones: import dvtool as a
    # package instead, from where it is installed, else from this file's package.
    _here = os.path.dirname(os.path.abspath(__file__))
    _is_package = os.path.isfile(os.path.join(_here, "cli.py"))
    if _is_package and os.path.abspath(sys.path[0] or os.curdir) == _here:
        del sys.path[0]
        sys.path.append(os.path.dirname(_here))


def main(argv: list[str] | None = None) -> None:
    """Run the CLI with `argv` (default: the script's arguments), then stop the session."""
    from dvtool.cli import main as cli_main

    try:
        cli_main(argv)
    finally:
        from dvtool.engines.spark.session import stop_active_session

        stop_active_session()


if __name__ == "__main__":
    main()
