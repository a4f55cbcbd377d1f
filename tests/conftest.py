"""Shared pytest configuration.

Spark: the ``spark`` (local[2]), ``spark_cluster`` (standalone, 127.0.0.1) and
``mvtable_wheel_site`` fixtures live in ``tests/support/spark.py``.  All are
session-scoped and created on first use only, so a run of pure tests never imports
pyspark or starts a JVM.  Tests that use them are marked ``spark`` / ``cluster``
automatically, so ``-m "not spark"`` runs without Java.

One exception to "on first use": when a selected test uses ``spark_cluster``, the cluster
(master + workers, no driver) boots in a background thread right after collection, so that
it is up by the time its tests run (``MVTABLE_TEST_PRESTART=0`` turns that off).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS_DIR = Path(__file__).resolve().parent
if str(_TESTS_DIR) not in sys.path:  # `support` is importable however pytest was started
    sys.path.insert(0, str(_TESTS_DIR))

# Importing support.spark does not import pyspark: it is imported inside the fixtures.
from support import spark as _spark_support  # noqa: E402
from support.s3servers import moto_s3, moto_server, seaweedfs_s3, seaweedfs_server  # noqa: E402,F401
from support.spark import mvtable_wheel_site, spark, spark_cluster  # noqa: E402,F401

_SPARK_FIXTURES = {"spark", "spark_cluster", "mvtable_wheel_site"}
_S3_FIXTURES = {"moto_s3", "moto_server", "seaweedfs_s3", "seaweedfs_server"}


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
    if any("spark_cluster" in getattr(item, "fixturenames", ()) for item in session.items):
        _spark_support.prestart_cluster()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _spark_support.stop_prestarted()
