"""``import mvtable`` is the front door, and ``mvtable.errors`` the one home of every error."""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import subprocess
import sys
from pathlib import Path

import mvtable
from mvtable import errors

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ["core", "lineage", "visibility", "connector", "conf"]


def test_front_door_names_resolve_lazily():
    # a fresh interpreter: importing mvtable must not import the connector (or pyspark)
    code = (
        "import sys, mvtable; assert 'mvtable.connector' not in sys.modules, 'eager import';"
        "assert 'pyspark' not in sys.modules;"
        "print(mvtable.Table.__module__, mvtable.register.__module__, mvtable.errors.MvTableError.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["mvtable.connector.table", "mvtable.connector", "MvTableError"]
    for name in mvtable.__all__:
        assert getattr(mvtable, name) is not None
    assert mvtable.__version__ == importlib.metadata.version("mvtable")


def test_every_error_derives_from_the_root_and_the_branches_are_distinct():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert len(classes) > 20
    assert all(issubclass(c, errors.MvTableError) for c in classes)
    branches = [errors.CommitConflictError, errors.CommitStateUnknownError, errors.NotFoundError, errors.InvalidInputError]
    branches.append(errors.CorruptionError)
    for a in branches:
        for b in branches:
            assert a is b or not issubclass(a, b)


def test_no_error_class_is_defined_outside_mvtable_errors():
    """One place to import every error from: a class named ``…Error`` anywhere else in the
    package is a second home."""
    strays = []
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            if path == REPO / "core" / "errors.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                    strays.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert strays == []


def test_every_core_module_is_bound_by_the_import_contract():
    """The layering itself is checked by import-linter (``.ci/importlint``, in ``make lint``);
    its core contract names modules one by one, so a new module of core/ must join it."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (core,) = [c for c in contracts if c["name"] == "the shared core imports no layer"]
    modules = {f"mvtable.{p.stem}" for p in (REPO / "core").glob("*.py") if p.stem != "__init__"}
    modules |= {f"mvtable.{p.name}" for p in (REPO / "core").iterdir() if (p / "__init__.py").exists()}
    assert modules <= set(core["source_modules"])


def test_capabilities_below_the_facade_never_import_table():
    # Table is a thin façade: gc, vacuum, lifecycle, keys, compaction, streaming, export …
    # take storage, the commit log and snapshots. Only the user-facing entry points (the
    # package, the façade itself, the CLI, the Spark procedures and the demo) open a Table.
    entry_points = {"__init__.py", "table.py", "table_scan.py", "demo.py"}
    connector = REPO / "connector"
    bad = []
    for path in connector.rglob("*.py"):
        rel = path.relative_to(connector)
        if rel.parts[0] in ("cli", "spark") or (len(rel.parts) == 1 and rel.name in entry_points):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            module = node.module or ""
            names = {a.name for a in node.names}
            if (
                module.endswith("table")
                and module.rsplit(".", 1)[-1] == "table"
                or ("Table" in names and module in ("", "mvtable", "mvtable.connector"))
            ):
                bad.append(f"connector/{rel}:{node.lineno} imports {module or '.'} {sorted(names)}")
    assert bad == []


def test_dir_and_all_come_from_the_one_list_of_exports():
    public = sorted(["__version__", *mvtable._EXPORTS])
    assert sorted(mvtable.__all__) == public
    assert dir(mvtable) == public  # not the helpers the module imports for itself
    for helper in ("Any", "TYPE_CHECKING", "import_module", "annotations"):
        assert helper not in dir(mvtable)


def test_what_type_checkers_read_is_the_list_of_exports():
    """The ``TYPE_CHECKING`` imports are what mypy/pyright see of the lazy names: each is
    one of ``_EXPORTS``, from the same module, and none is missing."""
    tree = ast.parse((REPO / "core" / "__init__.py").read_text())
    [block] = [n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"]
    seen = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name}: re-export it as itself (`as {alias.name}`)"
            seen[alias.name] = (f"{node.module}.{alias.name}", None) if node.module == "mvtable" else (node.module, alias.name)
    assert seen == {name: (module, attr) for name, (module, attr) in mvtable._EXPORTS.items()}


def test_the_result_and_parameter_types_are_documented_at_the_front_door():
    names = ("WriteResult", "DeleteResult", "UpsertResult", "CompactionResult", "VacuumResult", "GCResult")
    for name in (*names, "ActionResult", "ExportResult", "WriteMode", "Timestamp", "Keys", "Snapshot"):
        assert name in mvtable.__all__ and getattr(mvtable, name) is not None
        assert name in mvtable.__doc__
    assert not [n for n in mvtable.__all__ if n.endswith("Report")]  # one suffix for results
