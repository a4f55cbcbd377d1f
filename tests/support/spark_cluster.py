"""A Spark standalone cluster on 127.0.0.1: one master and ``workers`` workers, each a
``spark-class`` JVM in its own process group, started with free ports and stopped as
whole process trees (executors included).

Executors are separate JVMs with their own Python workers, which is what a local session
cannot show: everything the connector needs in ``read()``/``write()`` must travel in the
pickled plan, partitions and commit messages.  Drive it with ``cluster.run(script)``."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .processes import LOOPBACK, free_port, kill_tree
from .spark_jvm import QUICK_JIT_OPTS, cds_java_opts, log4j_file, shadow_spark_home, spark_env
from .spark_scripts import ScriptResult, run_on_cluster


@dataclass
class SparkCluster:
    """A running standalone master and its workers."""

    master_url: str
    webui_url: str
    base_dir: Path
    worker_webui_urls: list[str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    remove_base_dir: bool = False  # on stop (MVTABLE_KEEP_SPARK_LOGS=1 keeps it)

    def status(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(self.webui_url + "/json/", timeout=5) as resp:
            status: dict[str, Any] = json.load(resp)
            return status

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.status().get("workers", []) if w.get("state") == "ALIVE")
        except OSError:
            return 0

    def run(self, script: str, env: Mapping[str, str] | None = None, **kwargs: Any) -> ScriptResult:
        """Run a driver script against this cluster (see ``spark_scripts.run_spark_script``)."""
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
        """Stop every JVM of the cluster (idempotent)."""
        for proc in reversed(self.processes):
            kill_tree(proc.pid)
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
    while _LIVE_CLUSTERS:
        _LIVE_CLUSTERS[-1].stop()  # stop() removes it


def start_spark_cluster(
    base_dir: Path | None = None, workers: int = 2, cores: int = 1, memory: str = "1g", timeout: float = 180
) -> SparkCluster:
    """Start the master, then ``workers`` workers, and wait until every worker is ALIVE
    in the master's JSON.  Without ``base_dir`` a temporary folder is used and removed by
    ``stop()``."""
    remove = base_dir is None
    base = Path(tempfile.mkdtemp(prefix="mvtable-spark-cluster-")) if base_dir is None else Path(base_dir)
    home = shadow_spark_home()
    log_dir, work_dir, local_dir = base / "logs", base / "work", base / "local"
    for d in (log_dir, work_dir, local_dir):
        d.mkdir(parents=True, exist_ok=True)
    daemon_opts = f"-Dlog4j2.configurationFile=file:{log4j_file(base)} {QUICK_JIT_OPTS} -XX:+UseSerialGC {cds_java_opts()}"
    env = spark_env(
        home,
        extra={
            "SPARK_LOG_DIR": str(log_dir),
            "SPARK_WORKER_DIR": str(work_dir),
            "SPARK_LOCAL_DIRS": str(local_dir),
            "SPARK_PID_DIR": str(base),
            "SPARK_DAEMON_MEMORY": "384m",
            "SPARK_DAEMON_JAVA_OPTS": " ".join(daemon_opts.split()),
        },
    )
    spark_class = str(home / "bin" / "spark-class")
    port, webui = free_port(), free_port()
    cluster = SparkCluster(
        master_url=f"spark://{LOOPBACK}:{port}",
        webui_url=f"http://{LOOPBACK}:{webui}",
        base_dir=base,
        worker_webui_urls=[],
        remove_base_dir=remove,
    )
    _LIVE_CLUSTERS.append(cluster)

    def launch(name: str, args: list[str]) -> None:
        with open(log_dir / f"{name}.out", "wb") as log:
            cluster.processes.append(
                subprocess.Popen(
                    [spark_class, *args],
                    env=env,
                    cwd=str(base),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

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
