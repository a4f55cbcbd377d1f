"""Every package folder of the source tree ships in the wheel.

``pyproject.toml`` lists packages one by one (the folders map onto ``mvtable.*`` through
``package-dir``); a new subpackage missing from the list works in an editable install and
is silently absent from a built wheel, where every import of it fails."""

from __future__ import annotations

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


def test_extras_say_what_they_are_for_and_keep_pandas_where_pyspark_supports_it():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for spark_extra in ("spark", "connect", "test"):
        assert any(d.replace(" ", "").startswith("pandas") and "<3" in d for d in extras[spark_extra]), spark_extra
    named = {"iceberg": "pyiceberg", "duckdb": "duckdb", "polars": "polars"}
    for extra, package in named.items():
        assert any(d.startswith(package) for d in extras[extra]), extra
        assert any(d.startswith(package) for d in extras["engines"])
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Reading from other engines", 1)[1].split("\n## ", 1)[0]
    for extra in (*named, "engines"):
        assert f'"mvtable[{extra}]"' in section, extra
