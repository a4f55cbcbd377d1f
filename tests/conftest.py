"""Shared pytest configuration.

The fixtures (``spark``, ``read_route``, ``spark_cluster``, ``mvtable_wheel_site``,
``spark_connect``, the S3 servers and buckets) live in ``tests/support/fixtures.py``; see
``tests/support/__init__.py`` for what each support module starts.  All are created on first use only, so a run of pure
tests never imports pyspark or starts a JVM.  Tests that use them are marked ``spark`` /
``cluster`` / ``s3`` automatically, so ``-m "not spark"`` runs without Java.

One exception to "on first use": when a selected test uses ``spark_cluster`` or
``mvtable_wheel_site``, the cluster boots and the wheel builds in background threads
right after collection, so that they are ready by the time their tests run
(``MVTABLE_TEST_PRESTART=0`` turns that off).

``make test`` runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup
--no-loadscope-reorder``). Each worker is a pytest session of its own, with its own Spark
session and S3 servers. A test module runs whole on one worker (its module-scoped fixtures
are built once), and the tests that use the standalone cluster or the installed wheel share
one worker, so that one cluster boots and one wheel is built, when the first of them runs
(no prestart there: a worker cannot know at collection whether it will get them); so do the
modules with tests that use ``spark_connect``, so that they share its Connect servers. The
slow groups are handed out first.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_TESTS_DIR = Path(__file__).resolve().parent
if str(_TESTS_DIR) not in sys.path:  # `support` is importable however pytest was started
    sys.path.insert(0, str(_TESTS_DIR))

# Importing the fixtures imports neither pyspark nor a server client: they do, when used.
if os.environ.get("PYTEST_XDIST_WORKER"):
    # An xdist worker starts with COLUMNS=80 and LINES=24 in its environment, which the run
    # itself does not have; the CLI sizes its piped tables by COLUMNS, and its tests expect
    # the width a pipe gets.
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)

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
    spark_connect,
)

_SPARK_FIXTURES = {"spark", "spark_cluster", "mvtable_wheel_site", "spark_connect"}
_S3_FIXTURES = {"moto_s3", "moto_server", "seaweedfs_s3", "seaweedfs_server", "s3_fault_proxy"}
# the session fixtures that boot something big: their tests run on one xdist worker
_ONE_WORKER_FIXTURES = {"spark_cluster", "mvtable_wheel_site"}
ONE_WORKER_GROUP = "cluster-and-wheel"
SPARK_CONNECT_GROUP = "spark-connect"


def _grouped_by_xdist(config: pytest.Config) -> bool:
    """Whether this run distributes by ``xdist_group`` (``-n N --dist loadgroup``)."""
    return bool(getattr(config.option, "loadgroup", False))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    grouped = _grouped_by_xdist(config)
    # a module with a Spark Connect test goes whole to the worker that runs their servers
    connect_modules = {_module_of(i) for i in items if "spark_connect" in getattr(i, "fixturenames", ())}
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "spark_cluster" in names and item.get_closest_marker("cluster") is None:
            item.add_marker(pytest.mark.cluster)
        if names & _SPARK_FIXTURES and item.get_closest_marker("spark") is None:
            item.add_marker(pytest.mark.spark)
        if names & _S3_FIXTURES and item.get_closest_marker("s3") is None:
            item.add_marker(pytest.mark.s3)
        if grouped and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_xdist_group(item, names, connect_modules)))
    if grouped:
        _slow_groups_first(items)


def _module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


def _xdist_group(item: pytest.Item, fixture_names: set[str], connect_modules: set[str]) -> str:
    """The worker group of a test: its module's, unless it must share a worker with others."""
    if fixture_names & _ONE_WORKER_FIXTURES:
        return ONE_WORKER_GROUP
    if _module_of(item) in connect_modules:
        return SPARK_CONNECT_GROUP
    return _module_of(item)


def _group_of(item: pytest.Item) -> str:
    return str(next(item.iter_markers("xdist_group")).args[0])


def _slow_groups_first(items: list[pytest.Item]) -> None:
    """Order the groups for the workers (``--no-loadscope-reorder`` keeps this order): the
    ones that start JVMs, servers or racing processes first, the quick pure modules last,
    so that neither worker ends on a long group while the other has nothing left. Tests
    keep their order within a group; every worker computes the same order."""
    rank: dict[str, int] = {}
    for item in items:
        group = _group_of(item)
        if group in (ONE_WORKER_GROUP, SPARK_CONNECT_GROUP):
            r = 0
        elif group.startswith(("tests/benchmarks/", "tests/reliability/")):
            r = 1
        elif any(item.get_closest_marker(m) is not None for m in ("spark", "s3")):
            r = 2
        else:
            r = 3
        rank[group] = min(rank.get(group, r), r)
    first_seen = {g: i for i, g in reversed(list(enumerate(_group_of(item) for item in items)))}
    items.sort(key=lambda item: (rank[_group_of(item)], first_seen[_group_of(item)]))


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    used = set().union(*(getattr(item, "fixturenames", ()) for item in session.items))
    if "spark_cluster" in used:
        _fixtures.prestart_cluster()
    if "mvtable_wheel_site" in used:
        _fixtures.prestart_wheel()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _prestart.stop_all()
