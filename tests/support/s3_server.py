"""What the S3 servers on loopback have in common: a running server process
(:class:`S3Server`), one bucket on it (:class:`S3Endpoint`), the start-and-wait loop, and
the per-process registry that starts each kind of server once however many fixture
definitions ask for it and stops it when the last one is done.

The servers themselves: ``s3_seaweed`` (SeaweedFS, ``weed mini``) and ``s3_moto`` (moto).
Everything binds 127.0.0.1; data and logs live in one temp folder that is removed on stop
(``MVTABLE_KEEP_SERVER_LOGS=1`` keeps it).  Safety nets: an ``atexit`` hook and a
parent-death signal."""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .processes import LOOPBACK, parent_death_signal, stop_process, tail

REGION = "us-east-1"
STARTUP_TIMEOUT_S = float(os.environ.get("MVTABLE_S3_STARTUP_TIMEOUT", "60"))


class ServerStartError(RuntimeError):
    """A server did not come up; the message carries the tail of its log."""


class ServerUnavailable(Exception):
    """The server's binary or client library is not installed."""


def botocore_client(endpoint_url: str, key: str, secret: str, *, timeout: float = 10.0) -> Any:
    """A plain (synchronous) botocore S3 client, path-style, no retries."""
    import botocore.config
    import botocore.session

    session = botocore.session.get_session()
    return session.create_client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=botocore.config.Config(
            connect_timeout=min(timeout, 2.0),
            read_timeout=timeout,
            retries={"max_attempts": 1, "mode": "standard"},
            s3={"addressing_style": "path"},
        ),
    )


@dataclass(frozen=True)
class S3Endpoint:
    """One bucket on one running S3 server."""

    name: str
    endpoint_url: str
    key: str
    secret: str
    bucket: str

    def storage_options(self) -> dict[str, Any]:
        """Keyword arguments for ``s3fs.S3FileSystem`` (and so for fsspec ``storage_options``)."""
        return {
            "key": self.key,
            "secret": self.secret,
            "client_kwargs": {"endpoint_url": self.endpoint_url, "region_name": REGION},
        }

    def url(self, prefix: str = "") -> str:
        prefix = prefix.strip("/")
        return f"s3://{self.bucket}/{prefix}" if prefix else f"s3://{self.bucket}"

    def client(self) -> Any:
        """A botocore S3 client for this server."""
        return botocore_client(self.endpoint_url, self.key, self.secret)


@dataclass
class S3Server:
    """A running S3 server process. ``new_endpoint()`` makes a fresh bucket on it."""

    name: str
    endpoint_url: str
    key: str
    secret: str
    workdir: Path
    log_path: Path
    proc: subprocess.Popen[bytes]
    startup_s: float = 0.0
    stop_grace_s: float = 3.0
    leftovers: list[str] = field(default_factory=list)  # globs of files the server leaves outside workdir
    _stopped: bool = field(default=False, repr=False)
    _client: Any = field(default=None, repr=False)

    def client(self) -> Any:
        """A botocore client (one per server; botocore clients are thread-safe)."""
        if self._client is None:
            self._client = botocore_client(self.endpoint_url, self.key, self.secret)
        return self._client

    def new_endpoint(self, bucket: str | None = None) -> S3Endpoint:
        bucket = bucket or f"mvt-{uuid.uuid4().hex[:12]}"
        client = self.client()
        deadline = time.monotonic() + 20
        while True:
            try:
                client.create_bucket(Bucket=bucket)
                break
            except client.exceptions.BucketAlreadyOwnedByYou:
                break
            except Exception as exc:
                self.check_alive()
                if time.monotonic() > deadline:
                    raise ServerStartError(f"{self.name}: cannot create bucket {bucket}: {exc}\n{self.log_tail()}") from exc
                time.sleep(0.2)
        return S3Endpoint(self.name, self.endpoint_url, self.key, self.secret, bucket)

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise ServerStartError(
                f"{self.name} exited with code {self.proc.returncode}; log {self.log_path}:\n{self.log_tail()}"
            )

    def log_tail(self, lines: int = 60) -> str:
        text = tail(self.log_path, lines)
        for extra in sorted(self.workdir.glob("glog/*.ERROR")):  # weed's own error log
            text += f"\n--- {extra.name}:\n{tail(extra, 20)}"
        return text

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            stop_process(self.proc, self.stop_grace_s)
        finally:
            remove_leftovers(self.leftovers)
            if os.environ.get("MVTABLE_KEEP_SERVER_LOGS"):
                sys.stderr.write(f"{self.name} logs kept in {self.workdir}\n")
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)


def remove_leftovers(patterns: list[str]) -> None:
    for pattern in patterns:
        for path in glob.glob(pattern):
            try:
                os.unlink(path)
            except OSError:
                pass


def launch(
    name: str,
    cmd: list[str],
    *,
    workdir: Path,
    env: dict[str, str],
    port: int,
    key: str,
    secret: str,
    timeout: float,
    leftovers: list[str] | None = None,
    stop_grace_s: float = 3.0,
) -> S3Server:
    """Start ``cmd`` and wait until an authenticated round trip (list, create a bucket,
    put, get, delete an object) works on ``http://127.0.0.1:port``."""
    log_path = workdir / f"{name}.log"
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        log.write(("$ " + " ".join(cmd) + "\n").encode())
        log.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=env,
            preexec_fn=parent_death_signal(),
        )
    endpoint_url = f"http://{LOOPBACK}:{port}"
    server = S3Server(
        name, endpoint_url, key, secret, workdir, log_path, proc, stop_grace_s=stop_grace_s, leftovers=list(leftovers or [])
    )
    probe = botocore_client(endpoint_url, key, secret, timeout=5.0)
    deadline = t0 + timeout
    last_error: Exception | None = None
    try:
        while True:
            server.check_alive()
            try:
                if _round_trip(probe, "mvtable-probe"):
                    break
            except Exception as exc:  # not up yet
                last_error = exc
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"{name} did not answer on {endpoint_url} within {timeout:.0f}s "
                    f"(last error: {last_error!r}); log {log_path}:\n{server.log_tail()}"
                )
            time.sleep(0.1)
    except BaseException:
        stop_process(proc, 10)  # keep the workdir so the log can be read after a failed start
        remove_leftovers(server.leftovers)
        raise
    server.startup_s = time.monotonic() - t0
    return server


def _round_trip(client: Any, bucket: str) -> bool:
    client.list_buckets()
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    client.put_object(Bucket=bucket, Key="probe", Body=b"ok")
    ok: bool = client.get_object(Bucket=bucket, Key="probe")["Body"].read() == b"ok"
    client.delete_object(Bucket=bucket, Key="probe")
    return ok


def retry_on_port_clash(start: Callable[[], S3Server], attempts: int = 3) -> S3Server:
    """``start()`` again (with new ports) when a port was taken between choosing and binding."""
    last: ServerStartError | None = None
    for _ in range(attempts):
        try:
            return start()
        except ServerStartError as exc:
            last = exc
            if "address already in use" not in str(exc).lower():
                raise
    assert last is not None
    raise last


class Registry:
    """One server per kind per process, shared by every fixture definition that asks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.servers: dict[str, S3Server] = {}
        self.refs: dict[str, int] = {}
        self.failures: dict[str, BaseException] = {}

    def acquire(self, kind: str, start: Callable[[], S3Server]) -> S3Server:
        with self.lock:
            if kind in self.failures:  # do not pay a failed start once per test
                raise self.failures[kind]
            server = self.servers.get(kind)
            if server is None:
                try:
                    server = start()
                except BaseException as exc:
                    self.failures[kind] = exc
                    raise
                self.servers[kind] = server
            self.refs[kind] = self.refs.get(kind, 0) + 1
            return server

    def release(self, kind: str) -> None:
        with self.lock:
            self.refs[kind] -= 1
            if self.refs[kind] <= 0:
                server = self.servers.pop(kind, None)
                if server is not None:
                    server.stop()

    def stop_all(self) -> None:
        with self.lock:
            for server in self.servers.values():
                server.stop()
            self.servers.clear()


registry = Registry()
atexit.register(registry.stop_all)
