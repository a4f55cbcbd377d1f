"""Spark drivers in fresh interpreters: :func:`run_spark_script` runs a script with its own
SparkSession in a subprocess (local or against a standalone master) and stops the whole
process tree when it ends, whatever happened.

Tests need one when the shared in-process session cannot do: another master, another
static conf, or a Python path that starts with a wheel install.  The script sees a ready
``spark`` session, ``emit(obj)`` and ``wait_for_executors(n)``; emitted objects come
back, JSON decoded, as ``CompletedProcess.result``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

from .processes import kill_tree
from .spark_jvm import shadow_spark_home, spark_conf_for_tests, spark_env

_PRELUDE = r'''
import json as _json, os as _os, sys as _sys
from pyspark.sql import SparkSession as _SparkSession

_builder = _SparkSession.builder.master(_os.environ["MVTABLE_TEST_MASTER"]).appName(
    _os.environ.get("MVTABLE_TEST_APP", "mvtable-subprocess"))
for _k, _v in _json.loads(_os.environ["MVTABLE_TEST_CONF"]).items():
    _builder = _builder.config(_k, _v)
spark = _builder.getOrCreate()
spark.sparkContext.setLogLevel("WARN")

if _os.environ.get("MVTABLE_TEST_REGISTER") == "1":
    from mvtable.connector.spark.source import MvTableDataSource as _Source
    spark.dataSource.register(_Source)

_results = []


def emit(obj):
    """Send a JSON-serialisable object back to the test (``CompletedProcess.result``)."""
    _results.append(obj)
    with open(_os.environ["MVTABLE_TEST_RESULT"], "w") as _f:
        _json.dump(_results, _f)


def wait_for_executors(n, timeout=90.0):
    """Block until ``n`` executors (not counting the driver) registered."""
    import time as _time
    _deadline = _time.monotonic() + timeout
    while _time.monotonic() < _deadline:
        if spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1 >= n:
            return
        _time.sleep(0.1)
    raise TimeoutError(f"fewer than {n} executors after {timeout}s")


try:
'''

_EPILOGUE = r"""
finally:
    spark.stop()
"""


class ScriptResult(subprocess.CompletedProcess[str]):
    """A finished driver script: ``returncode``, ``stdout``, ``stderr`` and ``result``,
    the list of objects it emitted."""

    result: list


def run_spark_script(
    script: str,
    *,
    master: str = "local[2]",
    env: Mapping[str, str] | None = None,
    pythonpath: Sequence[os.PathLike[str] | str] = (),
    conf: Mapping[str, str] | None = None,
    register: bool = False,
    cluster: bool = False,
    timeout: float = 240,
    check: bool = True,
    cwd: os.PathLike[str] | str | None = None,
    work_dir: os.PathLike[str] | str | None = None,
) -> ScriptResult:
    """Run ``script`` in a fresh interpreter with its own SparkSession.

    ``pythonpath`` is prepended to PYTHONPATH (driver *and* its Python workers: Spark
    passes the JVM's PYTHONPATH on; with ``cluster`` it is also sent to the executors as
    ``spark.executorEnv.PYTHONPATH``, which they need: executors get their environment from
    the Worker, not from the driver).  ``register`` registers the mvtable data source like
    the ``spark`` fixture does.  With ``check`` a non-zero exit raises ``AssertionError`` with
    the tail of stderr.  The driver runs in ``cwd`` (default: ``work_dir``, never the
    repository root, whose ``pyspark_mvtable.py`` the workers would find through their
    ``sys.path[0]``)."""
    with tempfile.TemporaryDirectory(prefix="mvtable-spark-") as own_tmp:
        work = Path(work_dir if work_dir is not None else own_tmp)
        work.mkdir(parents=True, exist_ok=True)
        result_file = work / "result.json"
        script_file = work / "driver.py"
        body = textwrap.indent(textwrap.dedent(script).strip("\n") or "pass", "    ")
        script_file.write_text(_PRELUDE + body + "\n" + _EPILOGUE)
        full_conf = spark_conf_for_tests(work / "spark", cluster=cluster)
        if cluster and pythonpath:
            full_conf["spark.executorEnv.PYTHONPATH"] = os.pathsep.join(map(str, pythonpath))
        full_conf.update(conf or {})
        run_env = spark_env(shadow_spark_home(), extra=env, pythonpath=pythonpath)
        run_env.update(
            MVTABLE_TEST_MASTER=master,
            MVTABLE_TEST_CONF=json.dumps(full_conf),
            MVTABLE_TEST_RESULT=str(result_file),
            MVTABLE_TEST_REGISTER="1" if register else "0",
        )
        proc = run_driver(script_file, cwd=cwd if cwd is not None else work, env=run_env, timeout=timeout, what="Spark script")
        done = ScriptResult(proc.args, proc.returncode, proc.stdout, proc.stderr)
        done.result = json.loads(result_file.read_text()) if result_file.exists() else []
    if check and done.returncode != 0:
        raise AssertionError(
            f"Spark script failed with exit code {done.returncode}\n"
            f"--- stderr (tail) ---\n{done.stderr[-8000:]}\n--- stdout (tail) ---\n{done.stdout[-2000:]}"
        )
    return done


def run_on_cluster(master_url: str, script: str, env: Mapping[str, str] | None = None, **kwargs: object) -> ScriptResult:
    """:func:`run_spark_script` with a driver connected to a standalone master."""
    return run_spark_script(script, master=master_url, env=env, cluster=True, **kwargs)  # type: ignore[arg-type]


def run_driver(
    script_file: Path, *, cwd: os.PathLike[str] | str, env: Mapping[str, str], timeout: float, what: str
) -> subprocess.CompletedProcess[str]:
    """Run a driver script in its own process group and always stop the whole group: the
    driver JVM and its Python daemons must not outlive the script, even when it times out
    (then ``AssertionError`` with the tails of its output)."""
    proc = subprocess.Popen(
        [sys.executable, str(script_file)],
        cwd=str(cwd),
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        stdout, stderr = proc.communicate()
        raise AssertionError(
            f"{what} timed out after {timeout}s\n--- stderr (tail) ---\n{stderr[-6000:]}\n--- stdout (tail) ---\n{stdout[-2000:]}"
        ) from None
    finally:
        kill_tree(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
