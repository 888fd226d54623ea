"""The import rules that keep the architecture visible.

- dvtool.core is the pure protocol core: stdlib (minus IO modules), pyarrow as a data
  structure (not its IO modules), numpy (the Roaring codec), pyroaring, and dvtool.core /
  dvtool.errors only. No `open()`. The same holds for the format protocol modules outside
  it (`PURE_FORMAT_MODULES`: Iceberg's Puffin codec).
- Command modules (dvtool.commands) never import click or rich: they return result objects.
- The layers under the commands (dvtool.log, dvtool.storage, dvtool.data_files,
  dvtool.engines, dvtool.predicate) never import the commands, the CLI or the renderers,
  not even inside a function: dependencies point down.
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


def _modules(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


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


def _is_forbidden_in_core(name: str) -> bool:
    if any(name == f or name.startswith(f + ".") for f in CORE_FORBIDDEN):
        return True
    top = name.split(".")[0]
    if top == "dvtool":
        return not (name.startswith("dvtool.core") or name == "dvtool.errors")
    return top not in sys.stdlib_module_names and top not in CORE_ALLOWED_THIRD_PARTY


# Format protocol modules outside dvtool.core (pure bytes and JSON, like the core).
PURE_FORMAT_MODULES = [PACKAGE / "iceberg" / "puffin.py"]


@pytest.mark.parametrize(
    "path", _modules(PACKAGE / "core") + PURE_FORMAT_MODULES, ids=lambda p: p.name
)
def test_core_is_pure(path: Path) -> None:
    bad = sorted(n for n in _imports(path) if _is_forbidden_in_core(n))
    assert not bad, f"{path.name} imports {bad}: the protocol core must do no IO"
    assert not _calls_open(path), f"{path.name} calls open(): the protocol core must do no IO"


@pytest.mark.parametrize("path", _modules(PACKAGE / "commands"), ids=lambda p: p.name)
def test_commands_do_not_render(path: Path) -> None:
    bad = sorted(n for n in _imports(path) if n.split(".")[0] in {"click", "rich"})
    assert not bad, f"{path.name} imports {bad}: commands return results, cli.py renders"


LOWER_LAYERS = ("log", "storage", "data_files", "engines", "predicate", "iceberg")
UPPER_LAYERS = ("dvtool.commands", "dvtool.cli", "dvtool.render", "dvtool.api")


def _lower_layer_modules() -> list[Path]:
    return [p for layer in LOWER_LAYERS for p in _modules(PACKAGE / layer)]


def _reaches_up(name: str) -> bool:
    return any(
        name == u or name.startswith(u + ".") or name.startswith(u + "_") for u in UPPER_LAYERS
    )


@pytest.mark.parametrize("path", _lower_layer_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_lower_layers_do_not_import_commands(path: Path) -> None:
    bad = sorted(n for n in _imports(path) if _reaches_up(n))
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}: dependencies point down"


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
    assert [n for n in _imports(lazy) if _reaches_up(n)] == ["dvtool.commands.log_cleanup"]
    assert not _reaches_up("dvtool.log.cleanup") and _reaches_up("dvtool.cli_options")
