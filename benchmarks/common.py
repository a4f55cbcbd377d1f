"""Shared helpers: timing (interleaved medians), results, machine facts, table copies."""

from __future__ import annotations

import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MiB = 1024 * 1024

# Warm-up runs per system before the timed ones; ``run.py`` sets 0 for smoke runs.
DEFAULTS = {"warmup": 1}


def start_spark(base: Path, *, smoke: bool) -> Any:
    """The benchmarks' ``local[2]`` session, set up exactly like the tests' one
    (``tests/support/spark_session.py``: one set-up shared, not repeated), with mvtable
    registered.  Real runs keep the JVM's default tiered JIT (C2 matters for native
    Parquet); smoke runs take the quick-start C1.  The cases set filter pushdown themselves."""
    import mvtable
    from tests.support.spark_session import start_local_spark

    spark = start_local_spark(
        base, app_name="mvtable-benchmarks", conf={"spark.driver.memory": "1g" if smoke else "2g"}, quick_jit=smoke
    )
    mvtable.register(spark, filter_pushdown=False)
    return spark


def stop_spark(spark: Any) -> None:
    """Stop the session and its JVM (``SparkSession.stop`` alone leaves the JVM running)."""
    from tests.support.spark_session import stop_spark as stop

    stop(spark)


class PeerUnavailable(Exception):
    """A peer cannot do a case (recorded as ``n/a: reason``, never a failure)."""


@dataclass
class Timing:
    """Wall times (seconds) of one system in one case. ``error`` set = the system could
    not do it (only tolerated for peers)."""

    runs: list[float] = field(default_factory=list)
    warmup: list[float] = field(default_factory=list)
    result: Any = None
    error: str | None = None
    loads: list[float] = field(default_factory=list)  # 1-min load average after each run
    # CPU seconds (user + system, every thread of this process; not a Spark JVM) of each run:
    # on a shared, loaded machine wall time mostly measures the neighbours, CPU time does not
    cpu: list[float] = field(default_factory=list)

    @property
    def median(self) -> float | None:
        return statistics.median(self.runs) if self.runs else None

    @property
    def cpu_median(self) -> float | None:
        return statistics.median(self.cpu) if self.cpu else None

    def to_json(self) -> dict[str, Any]:
        return {
            "median_s": self.median,
            "runs_s": [round(r, 6) for r in self.runs],
            "warmup_s": [round(r, 6) for r in self.warmup],
            "load1": [round(x, 2) for x in self.loads],
            "cpu_median_s": self.cpu_median,
            "cpu_runs_s": [round(c, 6) for c in self.cpu],
            **({"na": self.error} if self.error else {}),
        }


@dataclass
class System:
    """One contender in a case: ``fn`` is timed; ``setup`` (untimed) runs before each call
    and its return value is passed to ``fn``; ``optional`` systems (peers) may fail."""

    fn: Callable[..., Any]
    setup: Callable[[], Any] | None = None
    optional: bool = False


def measure(
    systems: Mapping[str, System],
    *,
    repeat: int,
    warmup: int | None = None,
    log: Callable[[str], None] = print,
    cpu_clock: Callable[[], float] | None = None,
) -> dict[str, Timing]:
    """Warm each system up, then run the systems ``repeat`` times, interleaved and in a
    rotating order, so that a burst of load from elsewhere on a shared machine hits every
    system alike rather than one of them. Returns the timings per system.

    ``cpu_clock``: what counts as a run's CPU time (default: this process's; a Spark case
    passes ``spark_cpu_clock``, which adds the JVM's)."""
    clock = cpu_clock or process_cpu
    names = list(systems)
    out = {n: Timing() for n in names}
    warmup = DEFAULTS["warmup"] if warmup is None else warmup

    def once(name: str, *, timed: bool) -> float | None:
        s, t = systems[name], out[name]
        if t.error:
            return None
        try:
            arg = s.setup() if s.setup else None
            cpu = clock()
            start = time.perf_counter()
            result = s.fn(arg) if s.setup else s.fn()
            elapsed = time.perf_counter() - start
            if timed:
                t.cpu.append(clock() - cpu)
        except PeerUnavailable as exc:
            t.error = str(exc)
            return None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            if not s.optional:
                raise
            t.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            log(f"    {name} failed: {t.error}")
            log("".join(traceback.format_exception(exc)[-3:]))
            return None
        t.result = result
        t.loads.append(os.getloadavg()[0])
        return elapsed

    for _ in range(warmup):
        for n in names:
            e = once(n, timed=False)
            if e is not None:
                out[n].warmup.append(e)
    for i in range(repeat):
        k = i % len(names)
        for n in names[k:] + names[:k]:
            e = once(n, timed=True)
            if e is not None:
                out[n].runs.append(e)
    for n in names:
        med = out[n].median
        cpu = out[n].cpu_median
        if med is None:  # an optional system that failed every run: its error is logged below
            timing = "no run"
        else:
            timing = f"{med:.4f} s (median of {len(out[n].runs)}; CPU {cpu:.4f} s)" if cpu is not None else f"{med:.4f} s"
        log(f"    {n:<28} {'n/a: ' + out[n].error if out[n].error else timing}")
    return out


def process_cpu() -> float:
    """User + system CPU seconds of this process so far (all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def spark_cpu_clock(spark: Any) -> Callable[[], float]:
    """CPU seconds of this process plus the local Spark JVM's (driver and executors in one).

    A query's work is done in the JVM, a separate process: its CPU time is read from
    ``/proc/<pid>/stat`` (Linux). A short query's wall time on a shared machine moves with
    other load far more than its CPU time does."""
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    tick = os.sysconf("SC_CLK_TCK")

    def clock() -> float:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return process_cpu() + (int(fields[11]) + int(fields[12])) / tick  # utime, stime

    return clock


@dataclass
class CaseResult:
    """One line of the results table: mvtable's number against a baseline's, measured in
    the same run. For budget cases (planning, GC memory) the baseline is the budget."""

    name: str
    group: str
    description: str
    mvtable: float | None
    baseline_name: str
    baseline: float | None
    unit: str = "s"
    target: float | None = None  # ratio target (mvtable / baseline <= target)
    target_text: str = ""
    systems: dict[str, Any] = field(default_factory=dict)  # every contender's timing
    details: dict[str, Any] = field(default_factory=dict)
    check: str = "ok"  # correctness of the answers ("ok" or what differed)

    @property
    def load(self) -> float | None:
        """Median 1-min load average over the case's runs (the machine has other users)."""
        loads = [x for s in self.systems.values() if isinstance(s, dict) for x in s.get("load1", [])]
        return statistics.median(loads) if loads else None

    @property
    def ratio(self) -> float | None:
        if self.mvtable is None or not self.baseline:
            return None
        return self.mvtable / self.baseline

    @property
    def status(self) -> str:
        if self.check != "ok":
            return "WRONG"
        if self.ratio is None:
            return "n/a"
        if self.target is None:
            return "info"
        return "met" if self.ratio <= self.target else "MISSED"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(ratio=self.ratio, status=self.status, load1=self.load)
        return d


def hardlink_copy(src: Path, dst: Path) -> Path:
    """A copy of a table folder whose files are hard links (``cp -al``): instant, and
    safe because every format here only ever adds files or replaces them by rename."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(src), str(dst)], check=True)
    return dst


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
    }
    try:
        with open("/proc/meminfo") as f:
            total_kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
        info["memory_gib"] = round(total_kb / 1024 / 1024, 1)
    except (OSError, StopIteration, ValueError):
        pass
    try:
        info["loadavg_at_start"] = os.getloadavg()
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("pyarrow", "pyspark", "numpy", "deltalake", "pyiceberg", "pylance", "pyroaring", "pydantic", "mvtable"):
        try:  # metadata only: importing lance before Spark forks its workers makes it warn
            info[f"{dist}_version"] = version(dist)
        except PackageNotFoundError:
            info[f"{dist}_version"] = None
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        info["java"] = (out.stderr or out.stdout).splitlines()[0]
    except Exception:
        info["java"] = None
    try:
        out = subprocess.run([tpcgen_cli(), "--version"], capture_output=True, text=True, timeout=30)
        info["tpcgen_cli"] = out.stdout.strip()
    except Exception:
        info["tpcgen_cli"] = None
    return info


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def log(msg: str) -> None:
    print(msg, flush=True, file=sys.stderr)


def tpcgen_cli() -> str:
    """The ``tpcgen-cli`` binary: on PATH, or beside this interpreter (a pip install into an
    interpreter whose scripts folder is not on PATH, e.g. pyenv without a rehash)."""
    from pathlib import Path

    beside = Path(sys.executable).with_name("tpcgen-cli")
    return shutil.which("tpcgen-cli") or str(beside)
