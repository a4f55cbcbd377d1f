"""The Spark test infrastructure, and facts about Spark 4.3's Python data source API in
this environment that the connector relies on.  Every fact is asserted, so a Spark
upgrade that changes one shows up here first.

Throwaway data sources are defined in this module; ``pickle_by_value`` ships them to the
Python workers, which cannot import pytest test modules."""

from __future__ import annotations

import json
import os
import pkgutil
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow
import pyspark.sql.datasource  # noqa: F401
import pytest
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    GreaterThan,
    InputPartition,
    WriterCommitMessage,
)
from support.spark import (
    MVTABLE_SOURCE_MODULE,
    REPO_ROOT,
    install_wheel_into,
    pickle_by_value,
    run_spark_script,
    spark_conf,
)

pickle_by_value(__name__)

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


# --------------------------------------------------------------------------- throwaway sources


class _Probe(DataSourceReader):
    """Reports, from inside read(), what a Python worker looks like."""

    def __init__(self, options):
        self.options = options

    def partitions(self):
        return [InputPartition(i) for i in range(int(self.options.get("partitions", "2")))]

    def read(self, partition):
        import importlib.util

        import pyspark

        try:
            import mvtable.lineage  # noqa: F401  (the editable install's meta-path finder)

            mvtable_ok = "ok"
        except Exception as exc:  # pragma: no cover - reported, then asserted
            mvtable_ok = repr(exc)
        counter = getattr(sys, "_mvtable_infra_counter", 0) + 1
        sys._mvtable_infra_counter = counter  # survives in a reused worker
        info = {
            "partition": partition.value,
            "pid": os.getpid(),
            "executable": sys.executable,
            "pyspark": pyspark.__file__,
            "cwd": os.getcwd(),
            "path0": sys.path[0],
            "mvtable": mvtable_ok,
            "shim_importable": importlib.util.find_spec("pyspark_mvtable") is not None,
            "scan_sees_shim": any(m.name == "pyspark_mvtable" for m in pkgutil.iter_modules()),
            "counter": counter,
            "options": sorted(self.options.items()),
            "options_type": type(self.options).__name__,
        }
        yield (partition.value, json.dumps(info))


class ProbeSource(DataSource):
    @classmethod
    def name(cls):
        return "infra_probe"

    def schema(self):
        if self.options.get("fail") == "schema":
            raise ValueError("infra-boom-in-schema")
        return "p int, info string"

    def reader(self, schema):
        if self.options.get("fail") == "reader":
            raise ValueError("infra-boom-in-reader")
        if self.options.get("fail") == "read":
            return _FailingRead(self.options)
        return _Probe(self.options)


class _FailingRead(_Probe):
    def read(self, partition):
        raise ValueError("infra-boom-in-read")


class _Batches(DataSourceReader):
    def __init__(self, options, push):
        self.options = options
        self.pushed = None
        self.from_partitions = None
        self.push = push

    def partitions(self):
        self.from_partitions = "set in partitions()"
        return [InputPartition(0), InputPartition(1)]

    def read(self, partition):
        x = [partition.value * 10 + 1, partition.value * 10 + 2]
        typ = pyarrow.int64() if self.options.get("int64") else pyarrow.int32()
        note = json.dumps({"pushed": self.pushed, "from_partitions": self.from_partitions})
        yield pyarrow.RecordBatch.from_pydict({"x": pyarrow.array(x, typ), "note": pyarrow.array([note] * 2)})


class _PushingBatches(_Batches):
    def pushFilters(self, filters):
        self.pushed = []
        for f in filters:
            if isinstance(f, GreaterThan):
                self.pushed.append([list(f.attribute), f.value])  # claimed, NOT applied
            else:
                yield f


class BatchSource(DataSource):
    @classmethod
    def name(cls):
        return "infra_batches"

    def schema(self):
        return "x int, note string"

    def reader(self, schema):
        if self.options.get("push"):
            return _PushingBatches(self.options, True)
        return _Batches(self.options, False)


class Note(WriterCommitMessage):
    def __init__(self, info):
        self.info = info


class _RecordingWriter(DataSourceArrowWriter):
    """Writes nothing; records what it saw into <path>/commit.json or abort.json."""

    def __init__(self, options, overwrite):
        self.options = options
        self.overwrite = overwrite

    def write(self, iterator):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        fail = self.options.get("fail")
        if fail == "task" and ctx.partitionId() == 0:
            time.sleep(1.0)  # let the other task finish first
            raise RuntimeError("infra-boom-in-task")
        batches = []
        if self.options.get("consume", "true") == "true":
            batches = [
                {
                    "type": type(b).__module__ + "." + type(b).__name__,
                    "rows": b.num_rows,
                    "schema": [f"{f.name}: {f.type} nullable={f.nullable}" for f in b.schema],
                }
                for b in iterator
            ]
        return Note(
            {
                "partition": ctx.partitionId(),
                "attempt": ctx.attemptNumber(),
                "pid": os.getpid(),
                "batches": batches,
                "overwrite": self.overwrite,
                "options": dict(self.options.items()),
            }
        )

    def _record(self, name, messages):
        info = [m.info if m is not None else None for m in messages]
        Path(self.options["path"], name).write_text(json.dumps(info))

    def commit(self, messages):
        self._record("commit.json", messages)
        if self.options.get("fail") == "commit":
            raise RuntimeError("infra-boom-in-commit")

    def abort(self, messages):
        self._record("abort.json", messages)


class RecordingSink(DataSource):
    @classmethod
    def name(cls):
        return "infra_sink"

    def schema(self):
        if self.options.get("fail") == "schema":
            raise ValueError("infra-boom-in-sink-schema")
        return "id long"

    def writer(self, schema, overwrite):
        if self.options.get("fail") == "writer":
            raise ValueError("infra-boom-in-writer")
        return _RecordingWriter(self.options, overwrite)


@pytest.fixture(scope="module")
def infra(spark):
    for source in (ProbeSource, BatchSource, RecordingSink):
        spark.dataSource.register(source)
    return spark


def _infos(df):
    return sorted((json.loads(r.info) for r in df.collect()), key=lambda i: i["partition"])


# --------------------------------------------------------------------------- facts: no JVM


def _lenient_editable() -> bool:
    return any(getattr(f, "__name__", "") == "_EditableFinder" for f in sys.meta_path)


def test_lenient_editable_install_hides_the_shim_from_spark_module_scan():
    """Spark's lookup (pyspark/sql/worker/lookup_data_sources.py) lists modules with
    pkgutil.iter_modules(); a setuptools "lenient" editable install serves mvtable through a
    meta-path finder, which iter_modules cannot list.  Only a sys.path entry that *is* the
    repository root (the cwd of ``python -m pytest``, or of a Python worker whose JVM was
    started there) makes the shim visible."""
    import importlib.util

    if not _lenient_editable():
        pytest.skip("mvtable is not installed with a lenient (meta-path finder) editable install")
    assert importlib.util.find_spec("pyspark_mvtable") is not None
    elsewhere = [p for p in sys.path if Path(p or ".").resolve() != REPO_ROOT]
    assert "pyspark_mvtable" not in {m.name for m in pkgutil.iter_modules(elsewhere)}
    assert "pyspark_mvtable" in {m.name for m in pkgutil.iter_modules([str(REPO_ROOT)])}


# --------------------------------------------------------------------------- facts: local session


def test_session_config(spark):
    conf = spark.sparkContext.getConf()
    assert spark.sparkContext.master == "local[2]"
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.sparkContext.pythonExec == sys.executable
    assert spark.range(10).selectExpr("sum(id) s").first().s == 45
    # The fixture registered the real source (its module exists by now).
    import importlib.util

    if importlib.util.find_spec(MVTABLE_SOURCE_MODULE) is not None:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        assert manager.dataSourceExists("mvtable")


def test_python_workers(infra):
    """Executors' Python workers run this interpreter, import pyspark from site-packages
    (bytecode cached: the shadow SPARK_HOME hides pyspark.zip), import the editable mvtable,
    start in the driver's cwd, and are reused across tasks (``spark.python.worker.reuse``,
    a static SparkConf: module state such as an executor-side cache survives)."""
    jvm_cwd = infra.sparkContext._jvm.java.lang.System.getProperty("user.dir")
    first = _infos(infra.read.format("infra_probe").load())
    second = _infos(infra.read.format("infra_probe").load())
    for info in first + second:
        assert info["executable"] == sys.executable
        assert ".zip" not in info["pyspark"] and "site-packages" in info["pyspark"]
        assert info["mvtable"] == "ok"
        # Workers start in the driver JVM's cwd, which is also their sys.path[0]: run from
        # the repo root, a bare `import connector` or `import lineage` works in a worker.
        assert info["cwd"] == info["path0"] == jvm_cwd
        assert info["pid"] != os.getpid()
        assert info["shim_importable"]
        if _lenient_editable():  # Spark's own lookup would find the shim only through cwd
            assert info["scan_sees_shim"] == (Path(jvm_cwd).resolve() == REPO_ROOT)
    # Which idle worker takes a task depends on how many earlier tests left in the pool, so
    # ask for reuse by pigeonhole: a few more runs than the pool can hold fresh workers for.
    # A worker's counter is module state, so a counter above 1 proves the process was reused.
    runs = [first, second] + [_infos(infra.read.format("infra_probe").load()) for _ in range(4)]
    assert any(i["counter"] > 1 for run in runs for i in run), runs


def test_options_are_a_case_insensitive_dict_of_strings(infra):
    df = (
        infra.read.format("infra_probe")
        .option("versionAsOf", 1)
        .option("MixedCase", "A")
        .option("flag", True)
        .load("/some/table")
    )
    info = _infos(df)[0]
    assert info["options_type"] == "CaseInsensitiveDict"
    # keys arrive lower-cased (get() is case-insensitive), values as strings, load(path)
    # becomes the "path" option.
    assert info["options"] == [["flag", "true"], ["mixedcase", "A"], ["path", "/some/table"], ["versionasof", "1"]]


def test_user_schema_means_schema_is_not_called(infra):
    df = infra.read.format("infra_probe").schema("p int, info string").option("fail", "schema").load()
    assert len(df.collect()) == 2


def _raises(fn):
    with pytest.raises(Exception) as caught:
        fn()
    return caught.value


@pytest.mark.parametrize(
    "where, when, cls, condition",
    [
        ("schema", "load", "AnalysisException", "PYTHON_DATA_SOURCE_ERROR"),
        ("reader", "collect", "AnalysisException", "PYTHON_DATA_SOURCE_ERROR"),
        ("read", "collect", "PythonException", "PYTHON_EXCEPTION"),
    ],
)
def test_read_errors_surface_in_the_driver(infra, where, when, cls, condition):
    """schema() errors at load(); reader() only when the query runs (planning is lazy);
    read() errors as PythonException.  The message carries the Python traceback."""
    df = None

    def load():
        nonlocal df
        df = infra.read.format("infra_probe").option("fail", where).load()

    if when == "load":
        err = _raises(load)
    else:
        load()
        err = _raises(df.collect)
    assert type(err).__name__ == cls
    assert type(err).__module__ == "pyspark.errors.exceptions.captured"
    assert err.getCondition() == condition
    assert f"infra-boom-in-{where}" in str(err)
    assert "Traceback" in str(err)


def test_arrow_writer_batches(infra, tmp_path):
    """DataSourceArrowWriter.write gets an iterator of pyarrow.RecordBatch per task, at most
    spark.sql.execution.arrow.maxRecordsPerBatch (10000) rows each, typed from the Spark
    schema (nullability kept, timestamps as UTC microseconds)."""
    df = infra.range(0, 25000, numPartitions=2).selectExpr(
        "id", "cast(id as int) i", "if(id % 2 = 0, null, 'x') s", "timestamp'2024-01-02 03:04:05' ts"
    )
    # schema() is not called on write (it raises with fail=schema): the DataFrame's schema
    # is what writer() gets.  Options: the save() path and what the user set; no mode.
    df.write.format("infra_sink").mode("append").option("fail", "schema").option("someOption", 7).save(str(tmp_path))
    infos = json.loads((tmp_path / "commit.json").read_text())
    assert not (tmp_path / "abort.json").exists()
    assert infos[0]["options"] == {"path": str(tmp_path), "fail": "schema", "someoption": "7"}
    assert sorted(i["partition"] for i in infos) == [0, 1]
    for info in infos:
        assert info["overwrite"] is False
        assert [b["rows"] for b in info["batches"]] == [10000, 2500]
        assert {b["type"] for b in info["batches"]} == {"pyarrow.lib.RecordBatch"}
        assert info["batches"][0]["schema"] == [
            "id: int64 nullable=False",
            "i: int32 nullable=False",
            "s: string nullable=True",
            "ts: timestamp[us, tz=UTC] nullable=False",
        ]
    df.write.format("infra_sink").mode("overwrite").save(str(tmp_path))
    assert all(i["overwrite"] for i in json.loads((tmp_path / "commit.json").read_text()))


def test_unconsumed_write_iterator_is_silently_dropped(infra, tmp_path):
    """A write() that returns without draining its iterator succeeds: rows are lost."""
    infra.range(0, 100, numPartitions=2).write.format("infra_sink").option("consume", "false").mode("append").save(str(tmp_path))
    infos = json.loads((tmp_path / "commit.json").read_text())
    assert [i["batches"] for i in infos] == [[], []]


def test_writer_errors_and_abort(infra, tmp_path):
    """writer() → AnalysisException; a failing task → PythonException, then abort() with
    None for failed/unfinished tasks and the messages of finished ones (local mode does not
    retry tasks); a failing commit() → AnalysisException, then abort() with the same
    messages commit() got."""
    df = infra.range(0, 100, numPartitions=2)

    def write(fail, path):
        path.mkdir()
        df.write.format("infra_sink").option("fail", fail).mode("append").save(str(path))

    err = _raises(lambda: write("writer", tmp_path / "w"))
    assert type(err).__name__ == "AnalysisException"
    assert err.getCondition() == "PYTHON_DATA_SOURCE_ERROR"
    assert "infra-boom-in-writer" in str(err)
    assert not any((tmp_path / "w").iterdir())

    err = _raises(lambda: write("task", tmp_path / "t"))
    assert type(err).__name__ == "PythonException"
    assert "infra-boom-in-task" in str(err)
    assert not (tmp_path / "t" / "commit.json").exists()
    aborted = json.loads((tmp_path / "t" / "abort.json").read_text())
    assert len(aborted) == 2 and aborted[0] is None
    assert aborted[1] is None or aborted[1]["partition"] == 1  # finished before the failure

    err = _raises(lambda: write("commit", tmp_path / "c"))
    assert type(err).__name__ == "AnalysisException"
    assert err.getCondition() == "PYTHON_DATA_SOURCE_ERROR"
    assert "Failed to commit or abort Python data source write" in str(err)
    assert "infra-boom-in-commit" in str(err)
    committed = json.loads((tmp_path / "c" / "commit.json").read_text())
    assert json.loads((tmp_path / "c" / "abort.json").read_text()) == committed
    assert sorted(i["partition"] for i in committed) == [0, 1]


def test_read_batches_are_not_cast(infra):
    """read() yielding a batch whose Arrow types differ from the schema fails; Spark does
    not cast (int64 for an int column)."""
    err = _raises(infra.read.format("infra_batches").option("int64", "true").load().collect)
    assert type(err).__name__ == "PythonException"
    assert "DATA_SOURCE_RETURN_SCHEMA_MISMATCH" in str(err)


def test_filter_pushdown_is_a_runtime_conf(infra):
    """spark.sql.python.filterPushdown.enabled is false by default and can be flipped per
    query with spark.conf.set.  While it is off, a reader overriding pushFilters fails every
    read.  State set in pushFilters() reaches read(); state set in partitions() does not.
    Spark does not re-check filters the reader claims."""
    assert infra.conf.get(PUSHDOWN) == "false"
    plain = infra.read.format("infra_batches").load().where("x > 5").collect()
    assert sorted(r.x for r in plain) == [11, 12]
    assert json.loads(plain[0].note) == {"pushed": None, "from_partitions": None}

    err = _raises(infra.read.format("infra_batches").option("push", "1").load().collect)
    assert type(err).__name__ == "AnalysisException"
    assert "DATA_SOURCE_PUSHDOWN_DISABLED" in str(err)

    with spark_conf(infra, {PUSHDOWN: "true"}):
        rows = infra.read.format("infra_batches").option("push", "1").load().where("x > 5")
        rows = rows.collect()
        # x > 5 was claimed but not applied: Spark trusts the claim, so rows 1 and 2 leak.
        assert sorted(r.x for r in rows) == [1, 2, 11, 12]
        assert json.loads(rows[0].note) == {"pushed": [[["x"], 5]], "from_partitions": None}
    assert infra.conf.get(PUSHDOWN) == "false"
    err = _raises(infra.read.format("infra_batches").option("push", "1").load().collect)
    assert "DATA_SOURCE_PUSHDOWN_DISABLED" in str(err)


def test_source_classes_from_unimportable_modules_fail(infra, tmp_path, monkeypatch):
    """Data source classes are pickled by reference when their module is importable in the
    driver; workers that cannot import it fail.  Hence pickle_by_value() for test modules."""
    (tmp_path / "infra_private_source.py").write_text(
        textwrap.dedent("""
        from pyspark.sql.datasource import DataSource, DataSourceReader

        class _R(DataSourceReader):
            def read(self, partition):
                yield (1,)

        class PrivateSource(DataSource):
            @classmethod
            def name(cls):
                return "infra_private"

            def schema(self):
                return "x int"

            def reader(self, schema):
                return _R()
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import infra_private_source

    try:
        infra.dataSource.register(infra_private_source.PrivateSource)
        err = _raises(lambda: infra.read.format("infra_private").load().collect())
        assert "ModuleNotFoundError" in str(err) and "infra_private_source" in str(err)
    finally:
        sys.modules.pop("infra_private_source", None)


# --------------------------------------------------------------------------- cluster


_CLUSTER_SCRIPT = r'''
import os, json
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceArrowWriter,
                                    InputPartition, WriterCommitMessage)

def where_am_i():
    """pid, and pid + cmdline of the nearest java ancestor."""
    pid = os.getpid()
    p = pid
    while p > 1:
        stat = open(f"/proc/{p}/stat").read()
        p = int(stat[stat.rindex(")") + 2:].split()[1])
        cmd = open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        if "java" in cmd.split(" ")[0]:
            return pid, p, cmd
    return pid, None, ""

class R(DataSourceReader):
    def partitions(self):
        return [InputPartition(i) for i in range(4)]
    def read(self, part):
        import time
        time.sleep(0.5)
        pid, jvm, cmd = where_am_i()
        for k in range(3):
            yield (part.value * 100 + k, pid, jvm, "CoarseGrainedExecutorBackend" in cmd)

class Done(WriterCommitMessage):
    def __init__(self, file, rows, pid, jvm, executor):
        self.file, self.rows, self.pid, self.jvm, self.executor = file, rows, pid, jvm, executor

class W(DataSourceArrowWriter):
    def __init__(self, path):
        self.path = path
    def write(self, batches):
        from pyspark import TaskContext
        ctx = TaskContext.get()
        name = f"part-{ctx.partitionId()}-attempt-{ctx.attemptNumber()}.parquet"
        table = pa.Table.from_batches(list(batches))
        pq.write_table(table, os.path.join(self.path, name))
        pid, jvm, cmd = where_am_i()
        return Done(name, table.num_rows, pid, jvm, "CoarseGrainedExecutorBackend" in cmd)
    def commit(self, messages):
        pid, jvm, _ = where_am_i()
        Path(self.path, "_manifest.json").write_text(json.dumps({
            "files": sorted(m.file for m in messages),
            "rows": sum(m.rows for m in messages),
            "tasks": [[m.pid, m.jvm, m.executor] for m in messages],
            "commit": [pid, jvm]}))

class S(DataSource):
    @classmethod
    def name(cls):
        return "infra_cluster"
    def schema(self):
        return "k int, pid int, jvm int, executor boolean"
    def reader(self, schema):
        return R()
    def writer(self, schema, overwrite):
        return W(self.options["path"])

spark.dataSource.register(S)
wait_for_executors(2)
rows = spark.read.format("infra_cluster").load().collect()
out = os.environ["INFRA_OUT"]
os.makedirs(out, exist_ok=True)
spark.range(0, 1000, numPartitions=3).selectExpr("id", "cast(id * 2 as int) twice") \
    .write.format("infra_cluster").mode("append").save(out)
emit({
    "rows": [list(r) for r in rows],
    "driver_pid": os.getpid(),
    "driver_jvm": spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid(),
    "master": spark.sparkContext.master,
    "executors": spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1,
})
'''


@pytest.mark.cluster
def test_cluster_runs_python_source_in_executors(spark_cluster, tmp_path):
    status = spark_cluster.status()
    assert sum(w["state"] == "ALIVE" for w in status["workers"]) == 2
    assert all(w["host"] == "127.0.0.1" for w in status["workers"])

    out = tmp_path / "out"
    done = spark_cluster.run(_CLUSTER_SCRIPT, env={"INFRA_OUT": str(out)})
    result = done.result[0]
    assert result["master"] == spark_cluster.master_url
    assert result["executors"] == 2

    rows = result["rows"]
    assert sorted(r[0] for r in rows) == [p * 100 + k for p in range(4) for k in range(3)]
    task_pids = {r[1] for r in rows}
    executor_jvms = {r[2] for r in rows}
    assert result["driver_pid"] not in task_pids
    assert result["driver_jvm"] not in executor_jvms
    assert all(r[3] for r in rows), "read() did not run under CoarseGrainedExecutorBackend"
    assert len(executor_jvms) == 2, rows  # 4 slow tasks over 2 one-core executors

    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["rows"] == 1000
    assert manifest["files"] == [f"part-{i}-attempt-0.parquet" for i in range(3)]
    for pid, jvm, executor in manifest["tasks"]:
        assert executor and jvm != result["driver_jvm"] and pid != result["driver_pid"]
    commit_pid, commit_jvm = manifest["commit"]
    assert commit_jvm == result["driver_jvm"]  # commit() runs in a driver-side worker
    import pyarrow.parquet as pq

    table = pyarrow.concat_tables(pq.read_table(out / f) for f in manifest["files"])
    assert sorted(table.column("id").to_pylist()) == list(range(1000))
    assert table.schema.field("twice").type == pyarrow.int32()


# --------------------------------------------------------------------------- auto-discovery
#
# Both tests run a fresh driver in a subprocess.  A module-level fixture starts them in
# background threads as soon as this module begins (only the ones selected), so that
# they overlap with the in-process tests above; each test then waits for its result.

_THROWAWAY_MODULE = """
from pyspark.sql.datasource import DataSource, DataSourceReader


class _Reader(DataSourceReader):
    def read(self, partition):
        yield ("discovered", 42)


class DefaultSource(DataSource):
    @classmethod
    def name(cls):
        return "throwaway"

    def schema(self):
        return "what string, answer int"

    def reader(self, schema):
        return _Reader()
"""


def discover_throwaway(work: Path):
    """A ``pyspark_throwaway`` module on PYTHONPATH; a fresh driver reads
    ``format("throwaway")`` without registering anything."""
    site = work / "site"
    site.mkdir(parents=True)
    (site / "pyspark_throwaway.py").write_text(_THROWAWAY_MODULE)
    return run_spark_script(
        """
        import pkgutil
        rows = spark.read.format("throwaway").load().collect()
        emit({"rows": [list(r) for r in rows],
              "scan": sorted(m.name for m in pkgutil.iter_modules()
                             if m.name.startswith("pyspark_"))})
        """,
        pythonpath=[site],
        work_dir=work / "driver",
    )


def discover_mvtable(site: Path, table_path: Path):
    """A fresh driver whose PYTHONPATH starts with ``site`` (the project installed from its
    wheel) writes and then reads ``table_path`` through ``format("mvtable")`` without
    registering anything.  Its workers import the wheel's copy of mvtable."""
    return run_spark_script(
        """
        import os, pkgutil
        import pyspark_mvtable, mvtable.connector.spark.source as source
        path = os.environ["INFRA_TABLE"]
        df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, name string")
        df.write.format("mvtable").mode("append").save(path)
        rows = spark.read.format("mvtable").load(path).orderBy("id").collect()
        emit({"rows": [list(r) for r in rows],
              "shim": pyspark_mvtable.__file__,
              "source": source.__file__,
              "scan": any(m.name == "pyspark_mvtable" for m in pkgutil.iter_modules())})
        """,
        pythonpath=[site],
        env={"INFRA_TABLE": str(table_path)},
        work_dir=table_path.parent / "driver",
    )


def _wheel_then_discover(work: Path):
    site = install_wheel_into(work / "site")
    return site, discover_mvtable(site, work / "table")


@pytest.fixture(scope="module")
def background(request, tmp_path_factory):
    """name -> Future of the subprocess checks selected in this run, started at once."""
    selected = {
        getattr(item, "originalname", "") for item in request.session.items if getattr(item, "module", None) is request.module
    }
    jobs = {
        "throwaway": ("test_autodiscovery_of_a_pyspark_module", discover_throwaway),
        "wheel": ("test_autodiscovery_of_mvtable_from_built_wheel", _wheel_then_discover),
    }
    pool = ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="infra-bg")
    futures = {name: pool.submit(fn, tmp_path_factory.mktemp(name)) for name, (test, fn) in jobs.items() if test in selected}
    try:
        yield futures
    finally:
        pool.shutdown(wait=True)  # the subprocesses have timeouts and are killed on exit


@pytest.fixture(scope="module", autouse=True)
def _start_background(request):
    """Start the background checks when the module starts, if any of them is selected."""
    if any(
        getattr(item, "originalname", "").startswith("test_autodiscovery")
        for item in request.session.items
        if getattr(item, "module", None) is request.module
    ):
        request.getfixturevalue("background")


@pytest.mark.spark
def test_autodiscovery_of_a_pyspark_module(background):
    """Spark imports every top-level ``pyspark_*`` module on the Python path and registers
    its ``DefaultSource``: no register() call.  PYTHONPATH reaches the lookup worker."""
    result = background["throwaway"].result().result[0]
    assert result["rows"] == [["discovered", 42]]
    assert "pyspark_throwaway" in result["scan"]


@pytest.mark.spark
def test_autodiscovery_of_mvtable_from_built_wheel(background):
    """After a plain (wheel) install, ``format("mvtable")`` works with no registration."""
    site, done = background["wheel"].result()
    assert (site / "pyspark_mvtable.py").is_file()
    result = done.result[0]
    assert result["scan"] is True
    assert Path(result["shim"]).parent == site
    assert Path(result["source"]).is_relative_to(site)
    assert not Path(result["source"]).is_relative_to(REPO_ROOT)
    assert result["rows"] == [[1, "a"], [2, "b"], [3, "c"]]
