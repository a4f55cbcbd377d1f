"""Real filesystems for storage-fault tests: a small tmpfs that can be filled to the last
byte, and a read-only bind mount of a folder. Both need root (CI runs as root) and are
unmounted on the way out, whatever happened inside.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["fill", "mount_unavailable", "read_only_bind", "tmpfs"]

FILLER = ".filler"


def mount_unavailable() -> str | None:
    """Why these mounts cannot be made here (``None``: they can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "mounting a tmpfs or a read-only bind mount needs root (CI runs as root)"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "no mount/umount binaries"
    return None


def _run(*args: str) -> None:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise OSError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")


def _umount(path: Path) -> None:
    done = subprocess.run(["umount", str(path)], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:  # busy (a file still open): detach it, it goes once closed
        _run("umount", "-l", str(path))


@contextmanager
def tmpfs(path: Path, *, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of ``size_bytes`` mounted at ``path`` (created) until the block ends."""
    path.mkdir(parents=True, exist_ok=True)
    _run("mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path))
    try:
        yield path
    finally:
        _umount(path)


@contextmanager
def read_only_bind(source: Path, target: Path) -> Iterator[Path]:
    """``source`` seen read-only at ``target`` (created) until the block ends."""
    target.mkdir(parents=True, exist_ok=True)
    _run("mount", "--bind", str(source), str(target))
    try:
        _run("mount", "-o", "remount,ro,bind", str(target))
        yield target
    finally:
        _umount(target)


def fill(folder: Path, *, leave_bytes: int = 0) -> Path:
    """Fill the filesystem of ``folder`` with one file until at most ``leave_bytes`` are
    free (0: until a write fails with ``ENOSPC``). Returns the file: removing it gives
    the space back."""
    filler = folder / FILLER
    chunk = b"\xff" * 65536
    with open(filler, "ab", buffering=0) as f:
        while True:
            free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
            if free <= leave_bytes:
                break
            try:
                f.write(chunk[: max(1, min(len(chunk), free - leave_bytes))])
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    return filler
