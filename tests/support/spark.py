"""Spark test infrastructure: one shared ``local[2]`` session, a standalone cluster on
127.0.0.1, Spark drivers in fresh interpreters, and a built-wheel install of the project.

Fixtures (re-exported by ``tests/conftest.py``):

* ``spark``          session-scoped ``local[2]`` SparkSession; registers
                     ``MvTableDataSource`` when ``mvtable.connector.spark.source`` exists.
* ``spark_cluster``  session-scoped :class:`SparkCluster` (master + 2 workers, 1 core / 1g
                     each); drive it with ``spark_cluster.run(script)``.
* ``mvtable_wheel_site``  session-scoped folder holding the project installed from a
                     freshly built wheel (``pip install --no-deps --target``).

Only one SparkContext can live in a Python process, and the shared ``spark`` session
stays up, so anything that needs another driver (the cluster, a session without the
explicit registration, a different static conf) runs a script in a fresh interpreter
through :func:`run_spark_script` / :func:`run_on_cluster`.  The script sees a ready
``spark`` session and an ``emit(obj)`` function; ``emit``\\ed objects come back, JSON
decoded, as ``CompletedProcess.result``.

Facts about this environment are recorded in ``tests/connector/test_spark_infra.py``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = TESTS_DIR.parent
LOOPBACK = "127.0.0.1"

MVTABLE_SOURCE_MODULE = "mvtable.connector.spark.source"


# --------------------------------------------------------------------------- environment


def real_spark_home() -> Path:
    """The pip-installed pyspark package folder (it holds ``bin/`` and ``jars/``)."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()).resolve()


def cache_dir() -> Path:
    """Per-machine cache for the shadow SPARK_HOME and the JVM class-data archive
    (``MVTABLE_TEST_CACHE``, default ``~/.cache/mvtable-tests``)."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mvtable-tests"
    return Path(os.environ.get("MVTABLE_TEST_CACHE") or default)


def _pyspark_version() -> str:
    from pyspark.version import __version__

    return __version__


def shadow_spark_home(base_dir: Path | None = None) -> Path:
    """A SPARK_HOME made of symlinks to the pip pyspark's ``bin``, ``sbin`` and ``jars``,
    without ``python/lib/pyspark.zip``.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every Python worker's
    path.  That zip has no ``.pyc`` files, so each Python worker daemon compiles pyspark
    from source (~1 s CPU each, and a session starts one daemon per worker kind).  Without
    the zip the workers import the very same pyspark from site-packages, with its cached
    bytecode.  The folder lives at a fixed place in :func:`cache_dir` (``base_dir`` is
    ignored) because the JVM class-data archive is only valid for one class path.
    """
    real = real_spark_home()
    home = cache_dir() / f"spark-{_pyspark_version()}" / "home"
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
    """The JVM dynamic class-data-sharing archive for Spark's class path, if enabled
    (``MVTABLE_TEST_CDS=0`` disables).  It makes every Spark JVM start with ~40% less CPU
    (measured: 11-13 vs 19 CPU-seconds for a small driver run).  It is written once, when
    the first ``spark`` fixture session ends, and reused by every later JVM: drivers,
    master, workers, executors.  A stale or foreign archive is ignored by the JVM."""
    if os.environ.get("MVTABLE_TEST_CDS", "1") == "0":
        return None
    java = _java_binary()
    try:
        key = f"{java}:{java.stat().st_mtime_ns}:{_pyspark_version()}"
    except OSError:
        return None
    import hashlib

    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir() / f"spark-{_pyspark_version()}" / f"classes-{digest}.jsa"


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
    pythonpath: Sequence[os.PathLike | str] = (),
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


def _log4j_file(base_dir: Path) -> Path:
    path = Path(base_dir) / "log4j2.properties"
    if not path.exists():
        path.write_text(_LOG4J2)
    return path


# Test JVMs are short-lived: the C1 compiler alone costs ~35% less CPU to start a Spark
# driver than tiered C1+C2 (measured here: ~21 vs ~33 CPU-seconds for a session that runs
# one Python data source query).  MVTABLE_TEST_JAVA_OPTS replaces it.
JVM_OPTS = os.environ.get("MVTABLE_TEST_JAVA_OPTS", "-XX:TieredStopAtLevel=1")


def spark_conf_for_tests(base_dir: Path, *, cluster: bool = False, cds_dump_to: Path | None = None) -> dict[str, str]:
    """Spark configuration shared by the local session, subprocess drivers and cluster
    drivers.  ``base_dir`` receives the warehouse, local dirs and derby home."""
    base_dir = Path(base_dir)
    for sub in ("warehouse", "local", "derby"):
        (base_dir / sub).mkdir(parents=True, exist_ok=True)
    java_opts = (
        f"-Dderby.system.home={base_dir / 'derby'} "
        f"-Dlog4j2.configurationFile=file:{_log4j_file(base_dir)} {JVM_OPTS} "
        f"{cds_java_opts(cds_dump_to)}"
    ).strip()
    conf = {
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": java_opts,
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
                "spark.executor.extraJavaOptions": f"{JVM_OPTS} {cds_java_opts()}".strip(),
            }
        )
    return conf


# --------------------------------------------------------------------------- local session


def start_local_spark(
    base_dir: Path, master: str = "local[2]", conf: Mapping[str, str] | None = None, app_name: str = "mvtable-tests"
):
    """Start (or get) this process's SparkSession.  Sets the Spark environment variables
    in ``os.environ`` because the JVM inherits them when it is launched."""
    from pyspark.sql import SparkSession

    base_dir = Path(base_dir)
    base_dir.mkdir(parents=True, exist_ok=True)
    env = spark_env(shadow_spark_home(base_dir))
    for key in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME", "SPARK_HOME"):
        os.environ[key] = env[key]
    for key in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR"):
        os.environ.pop(key, None)
    global _CDS_PENDING
    archive = cds_archive()
    dump_to = None
    if archive is not None and not archive.is_file() and _CDS_PENDING is None:
        for stale in archive.parent.glob(f"{archive.name}.*.tmp"):  # from killed sessions
            with contextlib.suppress(OSError):
                if time.time() - stale.stat().st_mtime > 3600:
                    stale.unlink()
        dump_to = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
        _CDS_PENDING = (dump_to, archive)
    builder = SparkSession.builder.master(master).appName(app_name)
    conf = {**spark_conf_for_tests(base_dir, cds_dump_to=dump_to), **(conf or {})}
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


# (temporary archive the running session's JVM writes at exit, final archive path)
_CDS_PENDING: tuple[Path, Path] | None = None


def _publish_cds_archive(jvm_exit_code: int | None) -> None:
    global _CDS_PENDING
    if _CDS_PENDING is None:
        return
    tmp, archive = _CDS_PENDING
    _CDS_PENDING = None
    if jvm_exit_code == 0 and tmp.is_file() and tmp.stat().st_size > 0:
        os.replace(tmp, archive)  # atomic: a concurrent JVM maps either no file or a whole one
    else:
        with contextlib.suppress(OSError):
            tmp.unlink()


def register_mvtable(spark) -> bool:
    """Register ``MvTableDataSource`` if its module exists.  Returns whether it did.

    Only a missing ``mvtable.connector.spark.source`` (or a missing parent) is tolerated;
    any other import error in that module is a bug and is raised."""
    try:
        from mvtable.connector.spark.source import MvTableDataSource
    except ModuleNotFoundError as exc:
        if exc.name and MVTABLE_SOURCE_MODULE.startswith(exc.name):
            return False
        raise
    spark.dataSource.register(MvTableDataSource)
    return True


def stop_spark(spark) -> None:
    from pyspark import SparkContext

    try:
        spark.stop()
    finally:
        # Make sure py4j's gateway JVM goes away too (SparkContext.stop keeps it).
        gateway = SparkContext._gateway
        if gateway is not None:
            with contextlib.suppress(Exception):
                gateway.shutdown()
            proc = getattr(gateway, "proc", None)
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
                # Writing the class-data archive at exit takes a while (once per machine).
                with contextlib.suppress(Exception):
                    proc.wait(timeout=180 if _CDS_PENDING is not None else 30)
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                _publish_cds_archive(proc.returncode)
            SparkContext._gateway = None
            SparkContext._jvm = None


@contextlib.contextmanager
def spark_conf(spark, conf: Mapping[str, Any]) -> Iterator[None]:
    """Set runtime SQL confs for the duration of a ``with`` block, then restore them
    (unset the ones that were unset).  The ``spark`` session is shared: tests that change a
    conf must use this."""
    saved: dict[str, str | None] = {}
    for key, value in conf.items():
        saved[key] = spark.conf.get(key, None)
        spark.conf.set(key, value if isinstance(value, str) else json.dumps(value))
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def pickle_by_value(module_name: str) -> None:
    """Make classes defined in ``module_name`` (e.g. a test module) travel to Python
    workers by value.  Spark workers cannot import pytest's test modules (their
    ``sys.path`` starts with the driver's cwd, then pyspark, then site-packages), so a
    DataSource defined in a test module fails with ``ModuleNotFoundError`` unless its
    module is registered here."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[module_name])


# --------------------------------------------------------------------------- fresh drivers

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
    try:
        from mvtable.connector.spark.source import MvTableDataSource as _Src
    except ModuleNotFoundError as _exc:
        if not (_exc.name and "mvtable.connector.spark.source".startswith(_exc.name)):
            raise
    else:
        spark.dataSource.register(_Src)

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
        _time.sleep(0.2)
    raise TimeoutError(f"fewer than {n} executors after {timeout}s")


try:
'''

_EPILOGUE = r"""
finally:
    spark.stop()
"""


def run_spark_script(
    script: str,
    *,
    master: str = "local[2]",
    env: Mapping[str, str] | None = None,
    pythonpath: Sequence[os.PathLike | str] = (),
    conf: Mapping[str, str] | None = None,
    register: bool = False,
    cluster: bool = False,
    timeout: float = 240,
    check: bool = True,
    cwd: os.PathLike | str | None = None,
    work_dir: os.PathLike | str | None = None,
) -> subprocess.CompletedProcess:
    """Run ``script`` in a fresh interpreter with its own SparkSession.

    The script sees ``spark``, ``emit(obj)`` and ``wait_for_executors(n)``.  Returns the
    ``CompletedProcess`` (text stdout/stderr) with an extra ``result`` attribute: the list
    of emitted objects.  ``pythonpath`` is prepended to PYTHONPATH (driver *and* its Python
    workers: Spark passes the JVM's PYTHONPATH on to them; with ``cluster`` it is also
    sent to the executors as ``spark.executorEnv.PYTHONPATH``, which they need).
    ``register`` registers MvTableDataSource explicitly like the ``spark`` fixture does.
    With ``check`` a non-zero exit raises ``AssertionError`` with the tail of stderr.  The
    driver runs in ``cwd`` (default: ``work_dir``, never the repository root, whose
    ``pyspark_mvtable.py`` would otherwise be found through the workers' sys.path[0]).
    """
    own_tmp = None
    if work_dir is None:
        own_tmp = tempfile.TemporaryDirectory(prefix="mvtable-spark-")
        work_dir = own_tmp.name
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        result_file = work_dir / "result.json"
        script_file = work_dir / "driver.py"
        body = textwrap.indent(textwrap.dedent(script).strip("\n") or "pass", "    ")
        script_file.write_text(_PRELUDE + body + "\n" + _EPILOGUE)
        full_conf = spark_conf_for_tests(work_dir / "spark", cluster=cluster)
        if cluster and pythonpath:
            # Executors get their environment from the Worker, not from the driver: the
            # driver's PYTHONPATH does not reach them unless it is passed on explicitly.
            full_conf["spark.executorEnv.PYTHONPATH"] = os.pathsep.join(map(str, pythonpath))
        full_conf.update(conf or {})
        run_env = spark_env(shadow_spark_home(work_dir), extra=env, pythonpath=pythonpath)
        run_env.update(
            MVTABLE_TEST_MASTER=master,
            MVTABLE_TEST_CONF=json.dumps(full_conf),
            MVTABLE_TEST_RESULT=str(result_file),
            MVTABLE_TEST_REGISTER="1" if register else "0",
        )
        proc = subprocess.Popen(
            [sys.executable, str(script_file)],
            cwd=str(cwd if cwd is not None else work_dir),
            env=run_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            stdout, stderr = proc.communicate()
            raise AssertionError(
                f"Spark script timed out after {timeout}s\n--- stderr (tail) ---\n"
                f"{stderr[-6000:]}\n--- stdout (tail) ---\n{stdout[-2000:]}"
            ) from None
        finally:
            # The driver JVM and its Python daemons must not outlive the script.
            _kill_tree(proc.pid)
        completed = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        completed.result = json.loads(result_file.read_text()) if result_file.exists() else []
        if check and proc.returncode != 0:
            raise AssertionError(
                f"Spark script failed with exit code {proc.returncode}\n"
                f"--- stderr (tail) ---\n{stderr[-8000:]}\n--- stdout (tail) ---\n{stdout[-2000:]}"
            )
        return completed
    finally:
        if own_tmp is not None:
            own_tmp.cleanup()


def run_on_cluster(master_url: str, script: str, env: Mapping[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    """:func:`run_spark_script` with a driver connected to a standalone master."""
    return run_spark_script(script, master=master_url, env=env, cluster=True, **kwargs)


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may contain spaces and parentheses.
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(pid: int) -> list[int]:
    """All live descendants of ``pid`` (Linux /proc)."""
    children = _children_map()
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill_tree(pid: int, grace: float = 5.0) -> None:
    """Stop ``pid``, its process group (``pid`` must have been started with
    ``start_new_session=True``: its group id is its pid, so orphans whose parent already
    exited are still found) and every live descendant, including those that left the
    group (pyspark's daemon calls ``setpgid``).  TERM first, KILL after ``grace``."""
    pids = [pid] + descendants(pid)
    groups = {pid}
    for p in pids:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(p))
    groups.discard(os.getpgid(0))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for group in groups:
            with contextlib.suppress(OSError):
                os.killpg(group, sig)
        for p in pids:
            with contextlib.suppress(OSError):
                os.kill(p, sig)
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 2.0)
        while time.monotonic() < deadline:
            alive = [p for p in pids if _alive(p)]
            if not alive:
                return
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().decode(errors="replace")
        return state[state.rindex(")") + 2] != "Z"
    except OSError:
        return False


# --------------------------------------------------------------------------- cluster


@dataclass
class SparkCluster:
    """A standalone master and its workers, each a ``spark-class`` JVM in its own process
    group, all on 127.0.0.1."""

    master_url: str
    webui_url: str
    base_dir: Path
    worker_webui_urls: list[str]
    processes: list[subprocess.Popen] = field(default_factory=list)
    remove_base_dir: bool = False  # on stop (MVTABLE_KEEP_SPARK_LOGS=1 keeps it)

    def status(self) -> dict:
        with urllib.request.urlopen(self.webui_url + "/json/", timeout=5) as resp:
            return json.load(resp)

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.status().get("workers", []) if w.get("state") == "ALIVE")
        except OSError:
            return 0

    def run(self, script: str, env: Mapping[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
        """Run a driver script against this cluster (see :func:`run_on_cluster`)."""
        return run_on_cluster(self.master_url, script, env=env, **kwargs)

    def logs(self) -> str:
        """Tails of the master/worker logs and of every executor's stderr."""
        out = []
        paths = sorted((self.base_dir / "logs").glob("*")) + sorted((self.base_dir / "work").glob("*/app-*/*/stderr"))
        for path in paths:
            if path.is_file():
                out.append(f"=== {path.relative_to(self.base_dir)}\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(out)

    def stop(self) -> None:
        for proc in reversed(self.processes):
            _kill_tree(proc.pid)
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)
        self.processes.clear()
        with contextlib.suppress(ValueError):
            _LIVE_CLUSTERS.remove(self)
        if self.remove_base_dir and os.environ.get("MVTABLE_KEEP_SPARK_LOGS") != "1":
            shutil.rmtree(self.base_dir, ignore_errors=True)


_LIVE_CLUSTERS: list[SparkCluster] = []


@atexit.register
def _stop_live_clusters() -> None:  # e.g. pytest interrupted before fixture teardown
    for cluster in _LIVE_CLUSTERS:
        cluster.stop()


def start_spark_cluster(
    base_dir: Path | None = None, workers: int = 2, cores: int = 1, memory: str = "1g", timeout: float = 180
) -> SparkCluster:
    """Start ``$SPARK_HOME/bin/spark-class`` Master and ``workers`` Workers on 127.0.0.1
    with free ports, and wait until every worker is ALIVE in the master's JSON.  Without
    ``base_dir`` a temporary folder is used and removed by ``stop()``."""
    remove = base_dir is None
    base_dir = Path(tempfile.mkdtemp(prefix="mvtable-spark-cluster-") if remove else base_dir)
    home = shadow_spark_home(base_dir)
    log_dir, work_dir, local_dir = base_dir / "logs", base_dir / "work", base_dir / "local"
    for d in (log_dir, work_dir, local_dir):
        d.mkdir(parents=True, exist_ok=True)
    env = spark_env(
        home,
        extra={
            "SPARK_LOG_DIR": str(log_dir),
            "SPARK_WORKER_DIR": str(work_dir),
            "SPARK_LOCAL_DIRS": str(local_dir),
            "SPARK_PID_DIR": str(base_dir),
            "SPARK_DAEMON_MEMORY": "384m",
            "SPARK_DAEMON_JAVA_OPTS": (
                f"-Dlog4j2.configurationFile=file:{_log4j_file(base_dir)} {JVM_OPTS} -XX:+UseSerialGC {cds_java_opts()}"
            ),
        },
    )
    spark_class = str(home / "bin" / "spark-class")
    port, webui = free_port(), free_port()
    cluster = SparkCluster(
        master_url=f"spark://{LOOPBACK}:{port}",
        webui_url=f"http://{LOOPBACK}:{webui}",
        base_dir=base_dir,
        worker_webui_urls=[],
        remove_base_dir=remove,
    )
    _LIVE_CLUSTERS.append(cluster)

    def launch(name: str, args: list[str]) -> None:
        log = open(log_dir / f"{name}.out", "wb")
        try:
            cluster.processes.append(
                subprocess.Popen(
                    [spark_class, *args],
                    env=env,
                    cwd=str(base_dir),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        finally:
            log.close()

    try:
        launch(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", LOOPBACK, "--port", str(port), "--webui-port", str(webui)],
        )
        deadline = time.monotonic() + timeout
        while True:  # master first, so that workers do not spend time retrying
            try:
                # Spark moves to the next port if ours was taken meanwhile: trust the master.
                cluster.master_url = cluster.status()["url"]
                break
            except (OSError, ValueError, KeyError):
                pass
            _check_running(cluster, deadline)
            time.sleep(0.2)
        for i in range(workers):
            wport = free_port()
            cluster.worker_webui_urls.append(f"http://{LOOPBACK}:{wport}")
            launch(
                f"worker{i + 1}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    cluster.master_url,
                    "--host",
                    LOOPBACK,
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--webui-port",
                    str(wport),
                    "--work-dir",
                    str(work_dir / f"worker{i + 1}"),
                ],
            )
        while cluster.alive_workers() < workers:
            _check_running(cluster, deadline)
            time.sleep(0.2)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _check_running(cluster: SparkCluster, deadline: float) -> None:
    dead = [p.args for p in cluster.processes if p.poll() is not None]
    if dead or time.monotonic() > deadline:
        logs = cluster.logs()
        cluster.stop()
        raise RuntimeError(f"standalone cluster did not come up ({'exited: ' + str(dead) if dead else 'timeout'})\n{logs}")


# --------------------------------------------------------------------------- wheel


_SNAPSHOT_IGNORE = shutil.ignore_patterns(
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.pyc",
    ".pytest_cache",
    ".hypothesis",
    ".benchmarks",
    ".venv",
    "tests",
    "benchmarks",
    "spark-warehouse",
    "metastore_db",
    "derby.log",
)


def build_wheel(dist_dir: os.PathLike | str, project_dir: os.PathLike | str = REPO_ROOT) -> Path:
    """``python -m pip wheel --no-deps -w dist_dir <project>``; returns the wheel.

    The build runs on a snapshot copy of the project: an in-tree setuptools build leaves
    ``build/`` behind in the repository, and ``build/lib`` keeps modules that were since
    deleted, which later wheels would silently ship."""
    dist_dir = Path(dist_dir)
    dist_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mvtable-wheel-build-") as tmp:
        snapshot = Path(tmp) / "src"
        shutil.copytree(project_dir, snapshot, ignore=_SNAPSHOT_IGNORE, symlinks=True)
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", TMPDIR=tmp)
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist_dir), str(snapshot)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"pip wheel failed:\n{proc.stdout}\n{proc.stderr}")
    wheels = sorted(dist_dir.glob("mvtable-*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise RuntimeError(f"pip wheel produced no mvtable wheel in {dist_dir}:\n{proc.stdout}")
    return wheels[-1]


def install_wheel_into(target_dir: os.PathLike | str) -> Path:
    """Build the project wheel and ``pip install --no-deps --target target_dir`` it.
    Returns ``target_dir``; prepend it to PYTHONPATH to get a plain (non-editable) install
    whose top-level ``pyspark_mvtable`` module ``pkgutil.iter_modules`` can see."""
    target_dir = Path(target_dir)
    wheel = build_wheel(target_dir.parent / f"{target_dir.name}-dist")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "-q", "--target", str(target_dir), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"),
    )
    if proc.returncode != 0:
        raise RuntimeError(f"pip install --target failed:\n{proc.stdout}\n{proc.stderr}")
    return target_dir


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The shared ``local[2]`` SparkSession (started on first use, stopped at the end).
    Runtime confs changed by a test must be restored: use :func:`spark_conf`."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("Spark tests need Java 17+ on PATH or JAVA_HOME")
    session = start_local_spark(tmp_path_factory.mktemp("spark-session"))
    try:
        register_mvtable(session)
        yield session
    finally:
        stop_spark(session)


_PRESTARTED: dict[str, Any] = {}  # name -> concurrent.futures.Future


def prestart_cluster() -> None:
    """Start the standalone cluster in a background thread, so that it boots while other
    tests run (called by ``tests/conftest.py`` when a selected test uses ``spark_cluster``;
    ``MVTABLE_TEST_PRESTART=0`` disables).  The ``spark_cluster`` fixture takes it over."""
    if "cluster" in _PRESTARTED or os.environ.get("MVTABLE_TEST_PRESTART", "1") == "0":
        return
    import concurrent.futures

    future: concurrent.futures.Future = concurrent.futures.Future()

    def boot() -> None:
        try:
            future.set_result(start_spark_cluster())
        except BaseException as exc:  # handed to the fixture
            future.set_exception(exc)

    threading.Thread(target=boot, name="spark-cluster-prestart", daemon=True).start()
    _PRESTARTED["cluster"] = future


def stop_prestarted() -> None:
    """Stop whatever :func:`prestart_cluster` started (waits for a boot in progress)."""
    future = _PRESTARTED.pop("cluster", None)
    if future is not None:
        with contextlib.suppress(BaseException):
            future.result(timeout=300).stop()


@pytest.fixture(scope="session")
def spark_cluster():
    """Standalone master + 2 workers (1 core, 1g each) on 127.0.0.1."""
    future = _PRESTARTED.get("cluster")
    cluster = future.result() if future is not None else start_spark_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()
        _PRESTARTED.pop("cluster", None)


@pytest.fixture(scope="session")
def mvtable_wheel_site(tmp_path_factory) -> Path:
    """A folder with the project installed from a freshly built wheel."""
    return install_wheel_into(tmp_path_factory.mktemp("wheel") / "site")
