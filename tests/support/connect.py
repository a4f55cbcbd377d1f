"""Spark Connect for tests: a local Connect server (a Spark driver JVM with the Connect plugin,
bound to 127.0.0.1 on a free port) that several scripts share, and :func:`run_connect_script`,
which runs a script against it in a fresh interpreter with a gRPC client session.

The server is what ``SparkSession.builder.remote("local[2]")`` starts inside the client's
own process (the same plugin and artifact isolation settings, on ``local[2]``), but in a
process of its own, started once: a JVM start is most of what a Connect script costs, and
``remote("local")`` would also bind Spark's fixed port (15002), which a second suite on the
machine could hold. Each script is its own Connect session on the server (its registered
sources, views and settings are its own), and it sees the server as a user does: only
through the client. The ``spark_connect`` fixture keeps one server per server-side
configuration (``spark.jars``, say) and stops them at the end.

A fresh interpreter, because a Connect client refuses to start beside the classic session
the ``spark`` fixture keeps in the pytest process. The script sees ``spark`` (a
``pyspark.sql.connect.session.SparkSession``) and ``emit(obj)``; emitted objects come back,
JSON decoded, as ``result``. The client's process tree is stopped when the script ends."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .processes import LOOPBACK, kill_tree, parent_death_signal
from .spark_jvm import shadow_spark_home, spark_conf_for_tests, spark_env
from .spark_scripts import run_driver

# The server process: a classic session whose Connect plugin serves gRPC; it writes the
# port it got to ``port`` and runs until it is stopped, its stdin closes or its parent dies.
_SERVER = r"""
import json, os, sys
from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

conf = SparkConf(loadDefaults=True).setAll(list(json.loads(os.environ["MVTABLE_TEST_CONF"]).items()))
sc = SparkContext.getOrCreate(conf)
SparkSession(sc)
service = getattr(getattr(sc._jvm.org.apache.spark.sql.connect.service, "SparkConnectService$"), "MODULE$")
port = service.localPort()
with open("port.tmp", "w") as f:
    f.write(str(port))
os.replace("port.tmp", "port")
sys.stdin.read()
sc.stop()
"""

# What pyspark's remote("local") sets on the server it starts (pyspark.sql.connect.session).
_CONNECT_CONF = {
    "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
    "spark.sql.artifact.isolation.enabled": "true",
    "spark.sql.artifact.isolation.alwaysApplyClassloader": "true",
    "spark.connect.grpc.binding.address": LOOPBACK,
    "spark.connect.grpc.binding.port": "0",  # any free port: the server says which
}

_PRELUDE = r'''
import json as _json, os as _os
from pyspark.sql import SparkSession as _SparkSession

spark = _SparkSession.builder.remote(_os.environ["MVTABLE_TEST_REMOTE"]).getOrCreate()
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


@dataclass
class ConnectServer:
    """A running local Spark Connect server: where it listens and the token it wants."""

    port: int
    token: str
    proc: subprocess.Popen[str]
    work: Path
    log: Path

    @property
    def remote(self) -> str:
        """The client's connection string (``localhost``: the client then sends the token
        over a local channel, as for the server ``remote("local")`` starts)."""
        return f"sc://localhost:{self.port}"

    def stop(self) -> None:
        """Stop the server's process tree (the JVM and its Python workers) and remove its
        files. No graceful ``stop()``: nothing it holds outlives the test session."""
        try:
            kill_tree(self.proc.pid)
            self.proc.wait(timeout=10)
        finally:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            shutil.rmtree(self.work, ignore_errors=True)


def start_connect_server(conf: Mapping[str, str] | None = None, *, timeout: float = 180) -> ConnectServer:
    """Start a local Spark Connect server on ``local[2]``; ``conf`` goes to its session as it
    starts (``spark.jars``: a jar on the server's classpath from the start)."""
    work = Path(tempfile.mkdtemp(prefix="mvtable-connect-server-"))
    full_conf = spark_conf_for_tests(work / "spark")
    full_conf.update({"spark.master": "local[2]", "spark.app.name": "mvtable-connect", **_CONNECT_CONF})
    full_conf.update(conf or {})
    token = secrets.token_hex(16)
    env = spark_env(shadow_spark_home())
    env.update(MVTABLE_TEST_CONF=json.dumps(full_conf), SPARK_CONNECT_AUTHENTICATE_TOKEN=token)
    env.pop("SPARK_REMOTE", None)
    (work / "server.py").write_text(_SERVER)
    log = work / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(work / "server.py")],
            cwd=work,
            env=env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=parent_death_signal(),
        )
    server = ConnectServer(port=0, token=token, proc=proc, work=work, log=log)
    try:
        server.port = _wait_for_port(proc, work / "port", log, timeout)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_for_port(proc: subprocess.Popen[str], port_file: Path, log: Path, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if port_file.exists():
            return int(port_file.read_text())
        time.sleep(0.1)
    raise AssertionError(
        f"the Spark Connect server did not start (exit {proc.poll()})\n--- log (tail) ---\n{log.read_text()[-6000:]}"
    )


@dataclass
class ConnectServers:
    """The servers of a test session, one per server-side configuration, each started on first use."""

    servers: dict[str, ConnectServer] = field(default_factory=dict)

    def get(self, conf: Mapping[str, str] | None = None) -> ConnectServer:
        key = json.dumps(dict(conf or {}), sort_keys=True)
        if key not in self.servers:
            self.servers[key] = start_connect_server(conf)
        return self.servers[key]

    def run(
        self, script: str, *, conf: Mapping[str, str] | None = None, timeout: float = 300
    ) -> tuple[subprocess.CompletedProcess[str], list]:
        """:func:`run_connect_script` on the server with ``conf``."""
        return run_connect_script(script, server=self.get(conf), timeout=timeout)

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()
        self.servers.clear()


def run_connect_script(
    script: str, *, server: ConnectServer, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], list]:
    """Run ``script`` with a Spark Connect ``spark`` on ``server``; returns the process and
    what it emitted. A non-zero exit raises ``AssertionError`` with the tail of stderr."""
    with tempfile.TemporaryDirectory(prefix="mvtable-connect-") as tmp:
        work = Path(tmp)
        result_file = work / "result.json"
        script_file = work / "driver.py"
        body = textwrap.indent(textwrap.dedent(script).strip("\n"), "    ")
        script_file.write_text(_PRELUDE + body + "\n" + _EPILOGUE)
        env = spark_env(base={k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"})
        env.update(
            MVTABLE_TEST_REMOTE=server.remote,
            MVTABLE_TEST_RESULT=str(result_file),
            SPARK_CONNECT_AUTHENTICATE_TOKEN=server.token,
        )
        done = run_driver(script_file, cwd=work, env=env, timeout=timeout, what="Spark Connect script")
        result = json.loads(result_file.read_text()) if result_file.exists() else []
    if done.returncode != 0:
        raise AssertionError(
            f"Spark Connect script failed ({done.returncode})\n--- stderr (tail) ---\n{done.stderr[-6000:]}"
            f"\n--- server log (tail) ---\n{server.log.read_text()[-3000:]}"
        )
    return done, result
