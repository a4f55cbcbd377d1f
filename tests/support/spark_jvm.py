"""How every Spark JVM the tests and benchmarks start is set up: the shadow SPARK_HOME,
the JVM class-data archive, the quick-start JIT, a loopback-only environment and the
Spark configuration shared by the local session, script drivers and cluster drivers.

Starting JVMs is most of what the Spark tests cost on a small machine, so the three
start-up savings live here, measured on a 2-core machine:

* the shadow SPARK_HOME hides ``python/lib/pyspark.zip`` (no bytecode in it: each Python
  worker daemon recompiled pyspark, ~1 s of CPU each);
* the class-data archive: ~40% less CPU per JVM start (11-13 vs 19 CPU-seconds);
* C1 only (``-XX:TieredStopAtLevel=1``): ~35% less CPU for a short driver (21 vs 33 s).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from .processes import LOOPBACK

# Test JVMs are short-lived: C1 alone starts them cheaper than tiered C1+C2.
# MVTABLE_TEST_JAVA_OPTS replaces it; benchmarks measuring steady state pass quick_jit=False.
QUICK_JIT_OPTS = os.environ.get("MVTABLE_TEST_JAVA_OPTS", "-XX:TieredStopAtLevel=1")

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex
logger.nativeloader.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativeloader.level = error
logger.snappy.name = org.apache.spark.util.Utils
logger.snappy.level = error
"""


def real_spark_home() -> Path:
    """The pip-installed pyspark package folder (it holds ``bin/`` and ``jars/``)."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()).resolve()


def pyspark_version() -> str:
    from pyspark.version import __version__

    return str(__version__)


def cache_dir() -> Path:
    """Per-machine cache for the shadow SPARK_HOME and the class-data archive
    (``MVTABLE_TEST_CACHE``, default ``~/.cache/mvtable-tests``)."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mvtable-tests"
    return Path(os.environ.get("MVTABLE_TEST_CACHE") or default)


def shadow_spark_home() -> Path:
    """A SPARK_HOME made of symlinks to the pip pyspark's ``bin``, ``sbin`` and ``jars``,
    without ``python/lib/pyspark.zip``, which Spark would put first on every Python
    worker's path.  Without it the workers import the same pyspark from site-packages,
    bytecode cached.  The folder lives at a fixed place in :func:`cache_dir` because the
    class-data archive is only valid for one class path."""
    real = real_spark_home()
    home = cache_dir() / f"spark-{pyspark_version()}" / "home"
    if (home / "jars").resolve() == (real / "jars").resolve():
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="home-", dir=home.parent))
    for name in ("bin", "sbin", "jars"):
        if (real / name).exists():
            (staging / name).symlink_to(real / name, target_is_directory=True)
    if home.is_symlink() or home.exists():
        shutil.rmtree(home, ignore_errors=True)  # a stale home (pyspark reinstalled elsewhere)
    try:
        staging.rename(home)
    except OSError:  # another test process won the race
        shutil.rmtree(staging, ignore_errors=True)
    return home


def _java_binary() -> Path:
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else Path(shutil.which("java") or "java")
    return java.resolve()


def cds_archive() -> Path | None:
    """Where the JVM dynamic class-data archive for Spark's class path lives, or None when
    disabled (``MVTABLE_TEST_CDS=0``).  It is written once, when the first local session
    ends (see ``spark_session``), and then used by every JVM: drivers, master, workers,
    executors.  The JVM ignores a stale or foreign archive."""
    if os.environ.get("MVTABLE_TEST_CDS", "1") == "0":
        return None
    java = _java_binary()
    try:
        key = f"{java}:{java.stat().st_mtime_ns}:{pyspark_version()}"
    except OSError:
        return None
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / f"spark-{pyspark_version()}" / f"classes-{digest}.jsa"


def cds_java_opts(dump_to: Path | None = None) -> str:
    """JVM options that use the archive if it exists; otherwise, with ``dump_to``,
    options that write a new archive there when the JVM exits."""
    archive = cds_archive()
    if archive is None:
        return ""
    if archive.is_file():
        return f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"
    if dump_to is not None:
        return f"-XX:ArchiveClassesAtExit={dump_to} -Xlog:cds=off -Xlog:cds+dynamic=off"
    return ""


def spark_env(
    spark_home: Path | None = None,
    extra: Mapping[str, str] | None = None,
    pythonpath: Sequence[os.PathLike[str] | str] = (),
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for anything that starts a Spark JVM: loopback only, and every Python
    worker (driver side and executors) runs this very interpreter."""
    env = dict(os.environ if base is None else base)
    env.update(
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP=LOOPBACK,
        SPARK_LOCAL_HOSTNAME=LOOPBACK,
        PYTHONUNBUFFERED="1",
    )
    if spark_home is not None:
        env["SPARK_HOME"] = str(spark_home)
    # Never inherit a pyspark-shell or spark-submit configuration from the caller.
    for key in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "SPARK_MASTER_URL"):
        env.pop(key, None)
    if pythonpath:
        parts = [str(p) for p in pythonpath]
        if env.get("PYTHONPATH"):
            parts.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(parts)
    if extra:
        env.update(extra)
    return env


def log4j_file(base_dir: Path) -> Path:
    """A log4j2 configuration in ``base_dir``: warnings and up, on stderr."""
    path = Path(base_dir) / "log4j2.properties"
    if not path.exists():
        path.write_text(_LOG4J2)
    return path


def spark_conf_for_tests(
    base_dir: Path, *, cluster: bool = False, cds_dump_to: Path | None = None, quick_jit: bool = True
) -> dict[str, str]:
    """Spark configuration shared by the local session, script drivers and cluster
    drivers.  ``base_dir`` receives the warehouse, local dirs and derby home."""
    base_dir = Path(base_dir)
    for sub in ("warehouse", "local", "derby"):
        (base_dir / sub).mkdir(parents=True, exist_ok=True)
    jit = QUICK_JIT_OPTS if quick_jit else ""
    java_opts = (
        f"-Dderby.system.home={base_dir / 'derby'} -Dlog4j2.configurationFile=file:{log4j_file(base_dir)} "
        f"{jit} {cds_java_opts(cds_dump_to)}"
    )
    conf = {
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": " ".join(java_opts.split()),
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": str(base_dir / "warehouse"),
        "spark.local.dir": str(base_dir / "local"),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.python.worker.reuse": "true",
        "spark.python.worker.faulthandler.enabled": "true",
        "spark.sql.execution.pyspark.udf.faulthandler.enabled": "true",
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.executorEnv.SPARK_LOCAL_IP": LOOPBACK,
    }
    if cluster:
        conf.update(
            {
                "spark.executor.memory": "512m",
                "spark.executor.cores": "1",
                "spark.cores.max": "2",
                "spark.network.timeout": "120s",
                "spark.executor.extraJavaOptions": " ".join(f"{jit} {cds_java_opts()}".split()),
            }
        )
    return conf
