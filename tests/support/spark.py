"""Old import name of the Spark support, kept while other branches still use it: the
code lives in ``spark_session``, ``spark_scripts``, ``spark_cluster``, ``spark_jvm``,
``wheel_install`` and ``fixtures``."""

from __future__ import annotations

from .fixtures import mvtable_wheel_site, prestart_cluster, spark, spark_cluster  # noqa: F401
from .prestart import stop_all as stop_prestarted  # noqa: F401
from .processes import LOOPBACK, descendants, free_port  # noqa: F401
from .processes import kill_tree as _kill_tree  # noqa: F401
from .spark_cluster import SparkCluster, start_spark_cluster  # noqa: F401
from .spark_jvm import (  # noqa: F401
    QUICK_JIT_OPTS as JVM_OPTS,
)
from .spark_jvm import (  # noqa: F401
    cache_dir,
    cds_archive,
    cds_java_opts,
    real_spark_home,
    shadow_spark_home,
    spark_conf_for_tests,
    spark_env,
)
from .spark_scripts import run_on_cluster, run_spark_script  # noqa: F401
from .spark_session import pickle_by_value, register_data_source, spark_conf, start_local_spark, stop_spark  # noqa: F401
from .wheel_install import REPO_ROOT, build_wheel, install_wheel_into  # noqa: F401

TESTS_DIR = REPO_ROOT / "tests"
MVTABLE_SOURCE_MODULE = "mvtable.connector.spark.source"


def register_mvtable(spark_session: object) -> bool:
    """Register mvtable's data source on ``spark_session`` (always available now)."""
    register_data_source(spark_session)
    return True
