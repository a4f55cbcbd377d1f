"""The pytest fixtures over the support modules, re-exported by ``tests/conftest.py``.

All are created on first use only, so a run of pure tests never imports pyspark or starts
a JVM or a server; each stops what it started.  (The other support modules import no
pytest, so that the benchmarks can use them with the ``bench`` extra alone.)

* ``spark``            session-scoped in-process ``local[2]`` SparkSession, mvtable registered.
* ``read_route``       each test that uses it runs twice: reads on Spark's Parquet scan, then
  through the Python source.
* ``spark_cluster``    session-scoped standalone master + 2 workers (``spark_cluster``).
* ``mvtable_wheel_site`` session-scoped folder holding the project installed from its wheel.
* ``spark_connect``    session-scoped local Spark Connect servers, one per server configuration,
  and the scripts run against them (``ConnectServers``, ``connect``).
* ``seaweedfs_server`` / ``moto_server``  session-scoped S3 servers on loopback;
  ``seaweedfs_s3`` / ``moto_s3``  a fresh, empty bucket on one (``S3Endpoint``).
  A missing binary skips, unless ``MVTABLE_REQUIRE_S3=1`` makes it a failure.
* ``s3_fault_proxy``   a ``FaultProxy`` (``s3_fault_proxy``) in front of ``seaweedfs_s3``'s bucket,
  no faults until a test sets rules; stopped after the test.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from . import prestart
from .connect import ConnectServers
from .s3_fault_proxy import FaultProxy
from .s3_moto import start_moto
from .s3_seaweed import start_seaweedfs
from .s3_server import S3Endpoint, S3Server, ServerUnavailable, registry
from .spark_cluster import SparkCluster, start_spark_cluster
from .spark_session import PYTHON_ROUTE, register_data_source, spark_conf, start_local_spark, stop_spark
from .wheel_install import install_wheel_into

# --------------------------------------------------------------------------- Spark


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The shared ``local[2]`` SparkSession with the mvtable data source registered
    (started on first use, stopped at the end).
    Runtime confs changed by a test must be restored: use ``spark_session.spark_conf``."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("Spark tests need Java 17+ on PATH or JAVA_HOME")
    session = start_local_spark(tmp_path_factory.mktemp("spark-session"))
    try:
        register_data_source(session)
        yield session
    finally:
        stop_spark(session)


READ_ROUTES = ("native", "python")


@pytest.fixture(params=READ_ROUTES)
def read_route(request: pytest.FixtureRequest, spark: Any) -> Iterator[str]:
    """Run the test once per read route, which it gets as ``"native"`` or ``"python"``.

    ``native``: ``format("mvtable")`` and ``USING mvtable`` read on Spark's Parquet scan
    (mvtable's jar, as ``mvtable.register`` sets it up); ``python``: the session's
    ``spark.mvtable.nativeScan=false`` (``PYTHON_ROUTE``) for the whole test, so every
    DataFrame and view it makes reads through the Python source. Both must give the same
    rows. Modules whose tests read through ``format("mvtable")`` / ``USING mvtable`` apply
    it to all their tests (``pytestmark = pytest.mark.usefixtures("read_route")``); a test
    that is about one route only, or writes without reading, narrows it with
    ``@pytest.mark.parametrize("read_route", ["python"], indirect=True)``.

    Not applied to: write-only modules (save modes, write intents, post-commit hooks: writes
    always run the Python source), streams and the change feed (always the Python source),
    ``read_native`` / ``create_view`` (Spark's Parquet reader without the data source), tests
    that drive another process's session (Spark Connect, clusters, scripts: this session's
    setting does not reach them; ``test_spark_native_route`` covers those), and pure tests
    that start no Spark."""
    from mvtable.connector.spark import attach_native_scan

    if request.param == "python":
        with spark_conf(spark, PYTHON_ROUTE):
            yield request.param
    else:  # a session without the jar would read through Python here too: say so, not pass twice
        assert attach_native_scan(spark), "no native route: mvtable's jar could not be added (see the log)"
        yield request.param


def _stop_cluster(cluster: SparkCluster) -> None:
    cluster.stop()


def prestart_cluster() -> None:
    """Boot the cluster in the background (``tests/conftest.py``, when a selected test uses it)."""
    prestart.prestart("cluster", start_spark_cluster, _stop_cluster)


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkCluster]:
    """Standalone master + 2 workers (1 core, 1g each) on 127.0.0.1."""
    cluster = prestart.take("cluster", start_spark_cluster)
    try:
        yield cluster
    finally:
        cluster.stop()


def _install_wheel_in_tempdir() -> Path:
    return install_wheel_into(Path(tempfile.mkdtemp(prefix="mvtable-wheel-")) / "site")


def _remove_wheel_site(site: Path) -> None:
    shutil.rmtree(site.parent, ignore_errors=True)


def prestart_wheel() -> None:
    """Build and install the wheel in the background (``tests/conftest.py``)."""
    prestart.prestart("wheel", _install_wheel_in_tempdir, _remove_wheel_site)


@pytest.fixture(scope="session")
def mvtable_wheel_site() -> Iterator[Path]:
    """A folder with the project installed from a freshly built wheel (removed at the end)."""
    site = prestart.take("wheel", _install_wheel_in_tempdir)
    try:
        yield site
    finally:
        _remove_wheel_site(site)


@pytest.fixture(scope="session")
def spark_connect() -> Iterator[ConnectServers]:
    """Local Spark Connect servers, each started when a test first runs a script on its
    configuration (``spark_connect.run(script, conf=...)``) and shared by the later ones."""
    servers = ConnectServers()
    try:
        yield servers
    finally:
        servers.stop()


# --------------------------------------------------------------------------- S3


def _server(kind: str, start: Callable[[], S3Server]) -> Iterator[S3Server]:
    try:
        server = registry.acquire(kind, start)
    except ServerUnavailable as exc:
        if os.environ.get("MVTABLE_REQUIRE_S3"):
            pytest.fail(f"{kind}: {exc}")
        pytest.skip(f"{kind}: {exc}")
    try:
        yield server
    finally:
        registry.release(kind)


@pytest.fixture(scope="session")
def seaweedfs_server() -> Iterator[S3Server]:
    yield from _server("seaweedfs", start_seaweedfs)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[S3Server]:
    yield from _server("moto", start_moto)


@pytest.fixture
def seaweedfs_s3(seaweedfs_server: S3Server) -> S3Endpoint:
    """A fresh bucket on the session's SeaweedFS."""
    return seaweedfs_server.new_endpoint()


@pytest.fixture
def moto_s3(moto_server: S3Server) -> S3Endpoint:
    """A fresh bucket on the session's moto server."""
    return moto_server.new_endpoint()


@pytest.fixture
def s3_fault_proxy(seaweedfs_s3: S3Endpoint) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of a fresh SeaweedFS bucket (``proxy.endpoint`` is
    the bucket through it, ``proxy.real`` the bucket itself)."""
    proxy = FaultProxy(seaweedfs_s3)
    try:
        yield proxy
    finally:
        proxy.stop()
