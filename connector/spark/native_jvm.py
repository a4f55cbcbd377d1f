"""The deletion mask in Spark's own Parquet reader: a small JVM class, built on first use.

``read_native`` reads segment files with Spark's vectorized Parquet reader and must drop the
rows their deletion vectors name. Done in Spark expressions (``native_mask``, the fallback)
that costs clearly more than a plain Parquet scan on TPC-H, whatever the expression's shape:
the row index arrives as a ``_metadata`` struct, and every test of a bitmap is an expression
per row. ``MaskedParquetFileFormat`` (``jvm/``, Java; the jar also holds the classes of
``native_plan``) is Spark's
``ParquetFileFormat`` with one more column: it knows each row's position in its file
(counted, or asked of Spark's reader where Parquet may skip rows) and turns every batch of
positions into a byte column (1 = deleted) with one bit test per row in a plain loop, and
the query filters on it. That costs about what any
one-column filter costs (benchmarks/README.md, "The JVM mask"), and is how Delta's own
Parquet format applies its deletion vectors.

Executors read the deletion vectors themselves, through Hadoop's file systems like the
segment files (the driver sends only where they are), and check them as the Python
reader does (framing, CRC, cardinality, row range).

**Building.** The class is compiled against the Spark that runs it, the first time a
process needs it, with the JDK's ``javac`` (Spark needs only a JRE, so a machine may lack
it), into ``$MVTABLE_JVM_CACHE`` (default ``~/.cache/mvtable/jvm``) under a name that
hashes the source and the Spark version: one build per machine, shared by processes (one
builds while the others wait on a lock of the folder, and renames its jar into place). It is then added to the running
session (``ADD JAR``), which also ships it to a cluster's executors. Where it cannot be
built or added (no ``javac``, Spark Connect, ``MVTABLE_JVM_MASK=off``), ``read_native`` logs
why once and falls back to the expression mask: same rows, slower. ``spark_jar()`` (or ``mvtable spark-jar``)
builds the jar and gives its path, for ``spark-submit --jars`` where jobs should not
compile anything."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mvtable.errors import JvmMaskUnavailableError

logger = logging.getLogger("mvtable.connector")

FORMAT_CLASS = "io.mvtable.spark.MaskedParquetFileFormat"
SOURCE_DIR = Path(__file__).with_name("jvm")  # every .java file here goes into the one jar
DEFAULT_SOURCE_CLASS = "mvtable.DefaultSource"  # format("mvtable") with the jar: see native_plan
MASK_COLUMN_OPTION = "mvtable.maskColumn"
DVS_OPTION = "mvtable.deletionVectors"
SWITCH = "MVTABLE_JVM_MASK"  # "off": always use the expression mask


def spark_jars_dir() -> Path:
    """The jars of the Spark this process runs (``SPARK_HOME``, else pyspark's own)."""
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _spark_version(jars: Path) -> str:
    core = sorted(jars.glob("spark-core_*.jar"))
    return core[0].name if core else "unknown"


def _javac() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidates = [str(Path(java_home) / "bin" / "javac")] if java_home else []
    found = shutil.which("javac")
    if found:
        candidates.append(found)
    for c in candidates:
        if Path(c).is_file() and os.access(c, os.X_OK):
            return c
    raise JvmMaskUnavailableError(
        "no javac (a JDK) on this machine to build mvtable's Parquet deletion mask; install a JDK 17+ "
        "(Debian: openjdk-17-jdk-headless) or set JAVA_HOME to one"
    )


def cache_dir() -> Path:
    explicit = os.environ.get("MVTABLE_JVM_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mvtable" / "jvm"


def spark_jar(*, jars: Path | None = None) -> Path:
    """The path of the mask's jar for the Spark at ``jars`` (default: this process's), built if it is not there yet.

    Raises:
        JvmMaskUnavailableError: The jar cannot be built here (no JDK, a failed compile)."""
    jars = jars or spark_jars_dir()
    sources = sorted(SOURCE_DIR.glob("*.java"))
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    digest.update(_spark_version(jars).encode())
    key = digest.hexdigest()[:16]
    target = cache_dir() / f"mvtable-spark-{key}.jar"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(target.parent):
        if target.is_file():  # built by the process that held the lock
            return target
        _build(target, jars, sources)
    logger.info("mvtable: built %s", target)
    return target


@contextlib.contextmanager
def _build_lock(folder: Path) -> Iterator[None]:
    """Held while a jar is built into ``folder``, by one process at a time.

    Processes that need the jar at once (test workers, a job's first tasks) then wait for
    one build instead of each compiling. A lock on the folder itself leaves no lock file
    behind; without ``fcntl`` each process builds."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the rename into place still makes racing builds safe
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


# javac is a short-lived JVM: with the C1 compiler alone it starts in much less CPU than
# with tiered C1+C2 (no C2 threads compiling javac itself), and writes the same classes.
_JAVAC_JVM = ["-J-XX:TieredStopAtLevel=1"]


def _build(target: Path, jars: Path, sources: Sequence[Path]) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        classes = Path(tmp) / "classes"
        command = [
            _javac(),
            *_JAVAC_JVM,
            "--release",
            "17",
            "-nowarn",
            "-d",
            str(classes),
            "-cp",
            f"{jars}/*",
            *map(str, sources),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise JvmMaskUnavailableError(
                f"javac could not build {SOURCE_DIR}/*.java against {jars}: {done.stderr.strip()[-2000:]}"
            )
        partial = Path(tmp) / "mvtable-spark.jar"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: mvtable\n")
            for f in sorted(classes.rglob("*.class")):
                jar.write(f, f.relative_to(classes).as_posix())
        os.replace(partial, target)  # atomic: a reader never sees half a jar


_attached: dict[Any, bool] = {}
_lock = threading.Lock()


def available(spark: Any) -> bool:
    """Whether ``spark`` can read with the JVM mask, adding the jar to the session the first time.

    On ``False`` the reason was logged once (a warning) for this session."""
    if os.environ.get(SWITCH, "").lower() in ("off", "0", "false", "no"):
        _say_once(f"{SWITCH}=off")
        return False
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:  # Spark Connect: no JVM in this process; the server may have the jar
        _say_once(_CONNECT, template="%s")
        return False
    key = spark.sparkContext.applicationId
    with _lock:
        known = _attached.get(key)
        if known is None:
            known = _attached[key] = _attach(spark, jsession)
    return known


_said: set[str] = set()

_NO_JVM = (
    "mvtable: no JVM reader in this session: format('mvtable') reads through the Python source and "
    "read_native masks deleted rows with Spark expressions (same rows, slower): %s"
)
_CONNECT = (
    "mvtable: Spark Connect: this client cannot add mvtable's jar, so read_native masks deleted rows with "
    "Spark expressions; format('mvtable') and USING mvtable read on Spark's Parquet scan where the server was "
    "started with the jar (its spark.jars), through the Python source otherwise (same rows, slower)"
)


def _say_once(reason: str, *, template: str = _NO_JVM) -> None:
    if reason not in _said:
        _said.add(reason)
        logger.warning(template, reason)


def _attach(spark: Any, jsession: Any) -> bool:
    try:
        if not _loadable(spark, jsession):
            jsession.sessionState().resourceLoader().addJar(str(spark_jar()))
            if not _loadable(spark, jsession):
                raise JvmMaskUnavailableError(f"{FORMAT_CLASS} is still not loadable after adding its jar")
    except Exception as exc:  # any failure here only costs speed: fall back, and say so
        _say_once(str(getattr(exc, "message", exc)))
        return False
    return True


def _loadable(spark: Any, jsession: Any) -> bool:
    jvm = spark._jvm
    loader = _session_loader(spark, jsession)
    try:
        jvm.java.lang.Class.forName(FORMAT_CLASS, False, loader)
    except Exception:
        return False
    return True


def _session_loader(spark: Any, jsession: Any) -> Any:
    """The session's class loader (it holds jars added at run time), made the calling thread's.

    Spark looks a format class up through the thread's context loader, and each Python
    thread talks to its own JVM thread."""
    loader = jsession.sharedState().jarClassLoader()
    spark._jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)
    return loader


def masked_scan(
    spark: Any,
    schema: Any,
    files: Sequence[str],
    dv_lines: Sequence[str],
    *,
    mask_column: str,
) -> Any:
    """The files (all with deletes) read by ``MaskedParquetFileFormat``, deleted rows filtered out.

    Only ``schema``'s columns are read."""
    from pyspark.sql.types import ByteType, StructField, StructType

    _session_loader(spark, spark._jsparkSession)
    with_mask = StructType([*schema.fields, StructField(mask_column, ByteType(), True)])
    df = (
        spark.read.format(FORMAT_CLASS)
        .schema(with_mask)
        .option(MASK_COLUMN_OPTION, mask_column)
        .option(DVS_OPTION, "\n".join(dv_lines))
        .options(**VERIFY_PAGE_CHECKSUMS)
        .load(list(files))
    )
    return df.where(f"`{mask_column}` = 0").drop(mask_column)


def session_loader(spark: Any) -> Any:
    """The session's class loader (jars added at run time), made this thread's: mvtable's classes resolve through it."""
    return _session_loader(spark, spark._jsparkSession)


# Parquet-mr's reader checks each page's CRC (mvtable writes one in every page header)
# when this Hadoop setting is on; a file source's read options reach the Hadoop
# configuration of that scan only, so the session is left as it is. A damaged page then
# fails the query with Spark's "Encountered error while reading file <path>".
VERIFY_PAGE_CHECKSUMS = {"parquet.page.verify-checksum.enabled": "true"}


def dv_line(file_name: str, num_rows: int, ref: Any, *, root: str) -> str:
    """One file's line of the ``mvtable.deletionVectors`` option (see the Java class)."""
    head = [file_name, str(num_rows), str(ref.cardinality)]
    if ref.inline is not None:
        return "\t".join([*head, "inline", ref.inline])
    return "\t".join([*head, "file", f"{root}/{ref.path}", str(ref.offset), str(ref.size)])
