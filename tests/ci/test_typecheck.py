"""``.ci/typecheck`` (run by ``make lint``): the symlink tree it builds must be the installed
package layout, or mypy would check modules under the wrong names and miss every import
between the folders. The last test runs mypy on a planted error to prove findings come back
with their source path and fail the run."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / ".ci" / "typecheck"


def _load() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("typecheck", str(SCRIPT))
    spec = importlib.util.spec_from_loader("typecheck", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_tree_mirrors_the_package_dir_mapping(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    prefixes = _load().build_tree(REPO, tree)
    pkg = tree / "mvtable"
    assert (pkg / "__init__.py").resolve() == REPO / "core" / "__init__.py"
    assert (pkg / "errors.py").resolve() == REPO / "core" / "errors.py"
    assert (pkg / "storage").resolve() == REPO / "core" / "storage"
    for folder in ("lineage", "visibility", "connector", "conf"):
        assert (pkg / folder).resolve() == REPO / folder
    assert (pkg / "connector" / "spark").resolve() == REPO / "connector" / "spark"
    assert (tree / "pyspark_mvtable.py").resolve() == REPO / "pyspark_mvtable.py"
    assert not (pkg / "__pycache__").exists()
    # messages are translated back to the files a contributor edits
    rel = os.path.relpath(tree, REPO)
    assert prefixes[f"{rel}/mvtable/lineage/"] == "lineage/"
    assert prefixes[f"{rel}/mvtable/"] == "core/"


def test_rebuilt_each_run_so_new_files_appear(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    typecheck = _load()
    typecheck.build_tree(REPO, tree)
    (tree / "mvtable" / "stale.py").write_text("")
    typecheck.build_tree(REPO, tree)
    assert not (tree / "mvtable" / "stale.py").exists()


def test_a_type_error_fails_with_its_source_path(tmp_path: Path) -> None:
    """A small copy of the sources (core and lineage; the other folders empty) with one wrong
    annotation in lineage/: mypy must fail and name ``lineage/…``, not the symlink tree. That
    it knows the type of ``mvtable.errors.CorruptMetadataError`` there proves it sees the
    folders as one package."""
    repo = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("core", "lineage", ".ci"):
        shutil.copytree(REPO / folder, repo / folder, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", repo)
    for empty in ("visibility", "connector", "connector/spark", "conf"):
        (repo / empty).mkdir(parents=True, exist_ok=True)
        (repo / empty / "__init__.py").write_text("")
    (repo / "pyspark_mvtable.py").write_text("")
    (repo / "lineage" / "planted.py").write_text(
        "from mvtable.errors import CorruptMetadataError\n\n\ndef f() -> int:\n    return CorruptMetadataError('a', 'b')\n"
    )
    proc = subprocess.run([sys.executable, str(repo / ".ci" / "typecheck")], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0, proc.stdout
    assert (
        'lineage/planted.py:5: error: Incompatible return value type (got "CorruptMetadataError", expected "int")' in proc.stdout
    )
    assert "build/typecheck" not in proc.stdout
