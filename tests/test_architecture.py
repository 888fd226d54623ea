"""The import rules that keep the architecture visible.

Layers, lowest first: pure format protocol (no IO) -> storage -> log/metadata access ->
engines -> commands (library functions returning results) -> render -> CLI and API.

- Pure modules (`PURE`: Delta's protocol `dvtool.delta.protocol`, the shared DV codecs
  `dvtool.deletion_vectors`, `dvtool.arrays`, Iceberg's pure rules and names, Paimon's
  `dvtool.paimon.protocol`): stdlib (minus IO modules), pyarrow as a data structure (not
  its IO modules), numpy, pyroaring, other pure modules and dvtool.errors only. No `open()`.
- Format packages (`FORMATS`: dvtool.delta, dvtool.iceberg, dvtool.paimon) never import
  another format package, nor the commands, the CLI or the renderers.
- Command modules (dvtool.commands) never import click or rich: they return result objects.
- The layers under the commands (the format packages, dvtool.storage, dvtool.data_files,
  dvtool.engines, dvtool.predicate, dvtool.deletion_vectors, dvtool.arrays) never import the
  commands, the CLI or the renderers, not even inside a function: dependencies point down.
- The shared layers import a format package only where listed in `SHARED_ON_DELTA`: the
  rewrite engines, the predicate and the data-file writer still work on Delta's schema and
  statistics (issue 26 gives them a format-neutral schema); the list may only shrink.
- pyspark is imported only by modules of the Spark engine package (dvtool/engines/spark/),
  and only inside functions (or for type checking), so importing dvtool starts no Spark;
  its executor code (tasks.py) and path mapping (paths.py) import no pyspark at all.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dvtool"
CORE_ALLOWED_THIRD_PARTY = {"numpy", "pyarrow", "pyroaring"}
CORE_FORBIDDEN = {
    "os",
    "io",
    "pathlib",
    "shutil",
    "socket",
    "tempfile",
    "subprocess",
    "urllib.request",
    "http",
    "fsspec",
    "pyspark",
    "pyarrow.parquet",
    "pyarrow.fs",
    "pyarrow.dataset",
    "pyarrow.json",
    "pyarrow.csv",
}
SPARK_PACKAGE = PACKAGE / "engines" / "spark"
# Executors import tasks.py with plain Arrow batches; paths.py is pure string code.
SPARK_FREE = ("tasks.py", "paths.py")
# Pure packages and modules, as dotted names under dvtool.
PURE = (
    "delta.protocol",
    "deletion_vectors",
    "arrays",
    "byte_size",
    "storage.schemes",
    "iceberg.delete_index",
    "iceberg.metadata_files",
    "paimon.protocol",
)
FORMATS = ("delta", "iceberg", "paimon")
SHARED = ("storage", "data_files", "engines", "predicate", "deletion_vectors", "arrays")
# Shared modules that still import Delta (see the docstring); may only shrink.
SHARED_ON_DELTA = {
    "data_files/footer_stats.py",
    "data_files/writing.py",
    "engines/arrow_scan.py",
    "engines/base.py",
    "engines/rewrite.py",
    "engines/spark/schema.py",
    "engines/spark/tasks.py",
    "predicate/__init__.py",
    "predicate/parse.py",
    "predicate/resolve.py",
    "predicate/sqltypes.py",
}


def _modules(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def _dotted_modules(dotted: str) -> list[Path]:
    path = PACKAGE.joinpath(*dotted.split("."))
    return _modules(path) if path.is_dir() else [path.with_suffix(".py")]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _calls_open(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open"
        for node in ast.walk(tree)
    )


def _within(name: str, dotted: str) -> bool:
    return name == dotted or name.startswith(dotted + ".")


def _is_forbidden_in_core(name: str) -> bool:
    if any(_within(name, f) for f in CORE_FORBIDDEN):
        return True
    top = name.split(".")[0]
    if top == "dvtool":
        return not (any(_within(name, f"dvtool.{p}") for p in PURE) or name == "dvtool.errors")
    return top not in sys.stdlib_module_names and top not in CORE_ALLOWED_THIRD_PARTY


def _pure_modules() -> list[Path]:
    return [p for dotted in PURE for p in _dotted_modules(dotted)]


@pytest.mark.parametrize("path", _pure_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_is_pure(path: Path) -> None:
    bad = sorted(n for n in _imports(path) if _is_forbidden_in_core(n))
    assert not bad, f"{path.name} imports {bad}: the protocol core must do no IO"
    assert not _calls_open(path), f"{path.name} calls open(): the protocol core must do no IO"


@pytest.mark.parametrize("path", _modules(PACKAGE / "commands"), ids=lambda p: p.name)
def test_commands_do_not_render(path: Path) -> None:
    bad = sorted(n for n in _imports(path) if n.split(".")[0] in {"click", "rich"})
    assert not bad, f"{path.name} imports {bad}: commands return results, cli.py renders"


LOWER_LAYERS = (*FORMATS, *SHARED)
UPPER_LAYERS = ("dvtool.commands", "dvtool.cli", "dvtool.render", "dvtool.api")


def _lower_layer_modules() -> list[Path]:
    return [p for layer in LOWER_LAYERS for p in _modules(PACKAGE / layer)]


def _reaches_up(name: str) -> bool:
    return any(_within(name, u) or name.startswith(u + "_") for u in UPPER_LAYERS)


@pytest.mark.parametrize("path", _lower_layer_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_lower_layers_do_not_import_commands(path: Path) -> None:
    bad = sorted(n for n in _imports(path) if _reaches_up(n))
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}: dependencies point down"


def _format_of(name: str) -> str | None:
    return next((f for f in FORMATS if _within(name, f"dvtool.{f}")), None)


@pytest.mark.parametrize(
    "path",
    [p for f in FORMATS for p in _modules(PACKAGE / f)],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_format_packages_import_no_other_format(path: Path) -> None:
    own = path.relative_to(PACKAGE).parts[0]
    bad = sorted(n for n in _imports(path) if _format_of(n) not in (None, own))
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}: formats are plug-ins"


def _shared_modules() -> list[Path]:
    return [p for layer in SHARED for p in _modules(PACKAGE / layer)]


@pytest.mark.parametrize("path", _shared_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_shared_layers_import_formats_only_where_listed(path: Path) -> None:
    rel = str(path.relative_to(PACKAGE))
    formats = {f for n in _imports(path) if (f := _format_of(n)) is not None}
    allowed = {"delta"} if rel in SHARED_ON_DELTA else set()
    assert formats <= allowed, f"{rel} imports the format packages {sorted(formats - allowed)}"


def test_shared_on_delta_lists_only_real_dependencies() -> None:
    """The allowance shrinks as modules stop depending on Delta: no stale entries."""
    stale = [
        rel
        for rel in sorted(SHARED_ON_DELTA)
        if not any(_format_of(n) == "delta" for n in _imports(PACKAGE / rel))
    ]
    assert stale == []


def _imports_pyspark(names: set[str]) -> bool:
    return any(n.split(".")[0] == "pyspark" for n in names)


def _module_level_imports(path: Path) -> set[str]:
    """The imports a module runs when it is imported: none in functions or `if TYPE_CHECKING:`."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return names


def test_only_the_spark_engine_package_imports_pyspark() -> None:
    offenders = [
        str(p.relative_to(PACKAGE))
        for p in _modules(PACKAGE)
        if SPARK_PACKAGE not in p.parents and _imports_pyspark(_imports(p))
    ]
    assert offenders == []


@pytest.mark.parametrize("path", _modules(SPARK_PACKAGE), ids=lambda p: p.name)
def test_spark_engine_imports_pyspark_only_inside_functions(path: Path) -> None:
    assert not _imports_pyspark(_module_level_imports(path)), (
        f"{path.name} imports pyspark when imported: importing dvtool must not start Spark"
    )


@pytest.mark.parametrize("name", SPARK_FREE)
def test_spark_executor_and_path_modules_import_no_pyspark(name: str) -> None:
    path = SPARK_PACKAGE / name
    assert path.is_file()
    assert not _imports_pyspark(_imports(path)), f"{name} must not import pyspark at all"


def test_rule_detects_violations(tmp_path: Path) -> None:
    """The checks above would catch a violation (guards against a vacuous rule)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import fsspec\nfrom dvtool.storage import Storage\nopen('x')\n")
    assert {n for n in _imports(bad) if _is_forbidden_in_core(n)} == {"fsspec", "dvtool.storage"}
    assert _calls_open(bad)
    spark = tmp_path / "spark.py"
    spark.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pyspark.sql import Row\n"
        "def f():\n    import pyspark\n"
    )
    assert _imports_pyspark(_imports(spark))
    assert not _imports_pyspark(_module_level_imports(spark))
    spark.write_text("try:\n    import pyspark.sql\nexcept ImportError:\n    pass\n")
    assert _imports_pyspark(_module_level_imports(spark))
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from dvtool.commands.log_cleanup import run_log_cleanup\n")
    assert _format_of("dvtool.iceberg.puffin") == "iceberg" and _format_of("dvtool.deltas") is None
    assert [n for n in _imports(lazy) if _reaches_up(n)] == ["dvtool.commands.log_cleanup"]
    assert not _reaches_up("dvtool.delta.log.cleanup") and _reaches_up("dvtool.cli_options")
