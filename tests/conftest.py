"""Shared pytest configuration.

The fixtures (``spark``, ``read_route``, ``spark_cluster``, ``mvtable_wheel_site``, the S3
servers and buckets) live in ``tests/support/fixtures.py``; see ``tests/support/__init__.py`` for
what each support module starts.  All are created on first use only, so a run of pure
tests never imports pyspark or starts a JVM.  Tests that use them are marked ``spark`` /
``cluster`` / ``s3`` automatically, so ``-m "not spark"`` runs without Java.

One exception to "on first use": when a selected test uses ``spark_cluster`` or
``mvtable_wheel_site``, the cluster boots and the wheel builds in background threads
right after collection, so that they are ready by the time their tests run
(``MVTABLE_TEST_PRESTART=0`` turns that off).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS_DIR = Path(__file__).resolve().parent
if str(_TESTS_DIR) not in sys.path:  # `support` is importable however pytest was started
    sys.path.insert(0, str(_TESTS_DIR))

# Importing the fixtures imports neither pyspark nor a server client: they do, when used.
from support import fixtures as _fixtures  # noqa: E402
from support import prestart as _prestart  # noqa: E402
from support.fixtures import (  # noqa: E402,F401
    moto_s3,
    moto_server,
    mvtable_wheel_site,
    read_route,
    s3_fault_proxy,
    seaweedfs_s3,
    seaweedfs_server,
    spark,
    spark_cluster,
)

_SPARK_FIXTURES = {"spark", "spark_cluster", "mvtable_wheel_site"}
_S3_FIXTURES = {"moto_s3", "moto_server", "seaweedfs_s3", "seaweedfs_server", "s3_fault_proxy"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "spark_cluster" in names and item.get_closest_marker("cluster") is None:
            item.add_marker(pytest.mark.cluster)
        if names & _SPARK_FIXTURES and item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.spark)
        if names & _S3_FIXTURES and item.get_closest_marker("s3") is None:
            item.add_marker(pytest.mark.s3)


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    used = set().union(*(getattr(item, "fixturenames", ()) for item in session.items))
    if "spark_cluster" in used:
        _fixtures.prestart_cluster()
    if "mvtable_wheel_site" in used:
        _fixtures.prestart_wheel()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _prestart.stop_all()
