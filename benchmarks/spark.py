"""One ``local[2]`` Spark session for every Spark case, with mvtable registered."""

from __future__ import annotations

import os
import sys
from pathlib import Path

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
"""


def _shadow_spark_home(base: Path) -> Path:
    """SPARK_HOME of symlinks to pip pyspark's bin/sbin/jars, without python/lib/pyspark.zip:
    with the zip, every Python worker daemon imports pyspark from a zip with no bytecode
    cache (about 1 s of CPU per daemon); without it workers use site-packages' pyspark."""
    from pyspark.find_spark_home import _find_spark_home

    real = Path(_find_spark_home()).resolve()
    home = base / "spark-home"
    home.mkdir(parents=True, exist_ok=True)
    for name in ("bin", "sbin", "jars"):
        if (real / name).exists() and not (home / name).exists():
            (home / name).symlink_to(real / name, target_is_directory=True)
    return home


def start_spark(base: Path, *, smoke: bool, driver_memory: str = "2g"):
    from pyspark.sql import SparkSession

    from mvtable.connector import register

    base = Path(base)
    for sub in ("local", "warehouse"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    log4j = base / "log4j2.properties"
    log4j.write_text(_LOG4J2)
    os.environ.update(
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="127.0.0.1",
        SPARK_HOME=str(_shadow_spark_home(base)),
    )
    for key in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR"):
        os.environ.pop(key, None)
    # Smoke runs only check that every case works: the C1-only JIT starts the JVM with
    # ~35% less CPU. Real runs keep the default tiered JIT (C2 matters for native Parquet).
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j}" + (" -XX:TieredStopAtLevel=1" if smoke else "")
    conf = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "1g" if smoke else driver_memory,
        "spark.driver.extraJavaOptions": java_opts,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": str(base / "warehouse"),
        "spark.local.dir": str(base / "local"),
        "spark.sql.session.timeZone": "UTC",
        "spark.python.worker.reuse": "true",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
    }
    builder = SparkSession.builder.master("local[2]").appName("mvtable-benchmarks")
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark, filter_pushdown=False)  # cases set the pushdown flag themselves
    return spark
