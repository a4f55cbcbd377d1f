"""Spark Connect for tests: :func:`run_connect_script` runs a script against a Spark Connect
session made by ``SparkSession.builder.remote("local[2]")`` — a local Connect server (a
Spark driver JVM with the Connect plugin, bound to 127.0.0.1) and a gRPC client in one
fresh interpreter.

A fresh interpreter, because ``remote("local")`` refuses to start beside the classic
session the ``spark`` fixture keeps in the pytest process. The script sees ``spark`` (a
``pyspark.sql.connect.session.SparkSession``) and ``emit(obj)``; emitted objects come back,
JSON decoded, as ``result``. The process tree is stopped when the script ends."""

from __future__ import annotations

import json
import subprocess
import tempfile
import textwrap
from collections.abc import Mapping
from pathlib import Path

from .processes import LOOPBACK
from .spark_jvm import shadow_spark_home, spark_conf_for_tests, spark_env
from .spark_scripts import run_driver

_PRELUDE = r'''
import json as _json, os as _os
from pyspark.sql import SparkSession as _SparkSession

_builder = _SparkSession.builder.remote("local[2]").appName("mvtable-connect")
for _k, _v in _json.loads(_os.environ["MVTABLE_TEST_CONF"]).items():
    _builder = _builder.config(_k, _v)
spark = _builder.getOrCreate()
assert type(spark).__module__ == "pyspark.sql.connect.session", type(spark)
_results = []


def emit(obj):
    """Send a JSON-serialisable object back to the test."""
    _results.append(obj)
    with open(_os.environ["MVTABLE_TEST_RESULT"], "w") as _f:
        _json.dump(_results, _f)


try:
'''

_EPILOGUE = r"""
finally:
    spark.stop()
"""


def run_connect_script(
    script: str, *, conf: Mapping[str, str] | None = None, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], list]:
    """Run ``script`` with a Spark Connect ``spark``; returns the process and what it emitted.

    ``conf`` goes to the local server's session as it starts (``spark.jars``: a jar on the
    server's classpath from the start). A non-zero exit raises ``AssertionError`` with the
    tail of stderr."""
    with tempfile.TemporaryDirectory(prefix="mvtable-connect-") as tmp:
        work = Path(tmp)
        result_file = work / "result.json"
        script_file = work / "driver.py"
        body = textwrap.indent(textwrap.dedent(script).strip("\n"), "    ")
        script_file.write_text(_PRELUDE + body + "\n" + _EPILOGUE)
        full_conf = spark_conf_for_tests(work / "spark")
        full_conf["spark.connect.grpc.binding.address"] = LOOPBACK
        full_conf.update(conf or {})
        env = spark_env(shadow_spark_home())
        env.update(MVTABLE_TEST_CONF=json.dumps(full_conf), MVTABLE_TEST_RESULT=str(result_file))
        env.pop("SPARK_REMOTE", None)
        done = run_driver(script_file, cwd=work, env=env, timeout=timeout, what="Spark Connect script")
        result = json.loads(result_file.read_text()) if result_file.exists() else []
    if done.returncode != 0:
        raise AssertionError(f"Spark Connect script failed ({done.returncode})\n--- stderr (tail) ---\n{done.stderr[-6000:]}")
    return done, result
