"""Every package folder of the source tree ships in the wheel, with its type information.

``pyproject.toml`` lists packages one by one (the folders map onto ``mvtable.*`` through
``package-dir``); a new subpackage missing from the list works in an editable install and
is silently absent from a built wheel, where every import of it fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    dirs = {name: folder for name, folder in setuptools["package-dir"].items() if name}
    missing = []
    for name, folder in dirs.items():
        for init in sorted((REPO / folder).rglob("__init__.py")):
            parts = init.parent.relative_to(REPO / folder).parts
            package = ".".join((name, *parts))
            # a deeper package-dir entry maps that folder itself; it is checked under its own name
            if any(package == other or package.startswith(other + ".") for other in dirs if len(other) > len(name)):
                continue
            if package not in listed:
                missing.append(f"{package} ({init.parent.relative_to(REPO)})")
    assert not missing, f"add to [tool.setuptools] packages (and package-dir if needed): {missing}"


def test_the_wheel_ships_py_typed(mvtable_wheel_site):
    """PEP 561: without the marker a user's type checker ignores every hint in the package."""
    assert (mvtable_wheel_site / "mvtable" / "py.typed").is_file()
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["mvtable"]


USER_CODE = """
import pyarrow as pa
import mvtable

t = mvtable.Table.open("/tmp/t")
written = t.append(pa.table({"id": [1]}))
reveal_type(written)
reveal_type(t.delete(keys=[1]).deleted_rows)
reveal_type(t.compact())
t.write(pa.table({"id": [1]}), mode=mvtable.WriteMode.OVERWRITE)
t.write(pa.table({"id": [1]}), mode="append")
label: str = written.version
t.snapshot(timestamp=1.5j)
"""

# the package's dependencies are skipped (their types become Any): a user's run checks
# mvtable's hints only, in seconds rather than the minute numpy's and pydantic's take
MYPY_CONFIG = """
[mypy]
ignore_missing_imports = True
[mypy-numpy.*,pydantic.*,pydantic_core.*,rich.*,fsspec.*,pyroaring.*,typing_extensions]
follow_imports = skip
"""


def test_a_users_mypy_sees_the_packages_types(mvtable_wheel_site, tmp_path):
    """mypy run on a user's script against the installed wheel (not this source tree):
    the results' types are revealed, and misuse of a typed parameter or result is found."""
    (tmp_path / "user.py").write_text(USER_CODE)
    (tmp_path / "mypy.ini").write_text(MYPY_CONFIG)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(mvtable_wheel_site)  # found as an installed package: py.typed decides
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--no-incremental", "--cache-dir", os.devnull, "user.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout
    assert "missing library stubs or py.typed marker" not in out, out
    assert 'Revealed type is "mvtable.connector.results.WriteResult"' in out, out
    assert 'user.py:8: note: Revealed type is "int"' in out, out
    assert 'Revealed type is "mvtable.connector.results.CompactionResult"' in out, out
    assert 'user.py:12: error: Incompatible types in assignment (expression has type "int", variable has type "str")' in out, out
    assert 'user.py:13: error: Argument "timestamp" to "snapshot" of "Table" has incompatible type "complex"' in out, out
    assert out.count("error:") == 2, out  # the two writes type-check: a WriteMode and its name


def test_extras_say_what_they_are_for_and_keep_pandas_where_pyspark_supports_it():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for spark_extra in ("spark", "connect", "test"):
        assert any(d.replace(" ", "").startswith("pandas") and "<3" in d for d in extras[spark_extra]), spark_extra
    named = {"iceberg": "pyiceberg", "duckdb": "duckdb", "polars": "polars"}
    for extra, package in named.items():
        assert any(d.startswith(package) for d in extras[extra]), extra
        assert any(d.startswith(package) for d in extras["engines"])
    section = (REPO / "docs" / "engines.md").read_text()
    for extra in (*named, "engines"):
        assert f'"mvtable[{extra}]"' in section, extra
