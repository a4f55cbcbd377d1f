"""Process plumbing shared by every server and driver the tests start: free loopback
ports, whole process trees stopped for good, a parent-death signal, short temp folders.

Everything the tests start binds 127.0.0.1 and is stopped by whoever started it; these
helpers make "stopped" mean the whole tree, including daemons that left the group."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection
from pathlib import Path

LOOPBACK = "127.0.0.1"


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports that were free on 127.0.0.1 a moment ago (all bound at once,
    so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((LOOPBACK, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    """One port that was free on 127.0.0.1 a moment ago."""
    return free_ports(1)[0]


def free_port_pair(offset: int, avoid: Collection[int] = ()) -> tuple[int, int]:
    """A free port ``p`` on 127.0.0.1 such that ``p + offset`` is free too (servers that
    derive a second port from the first need both)."""
    for _ in range(200):
        p = free_port()
        if p + offset > 65535 or p in avoid or p + offset in avoid:
            continue
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as a, socket.socket(socket.AF_INET, socket.SOCK_STREAM) as b:
                a.bind((LOOPBACK, p))
                b.bind((LOOPBACK, p + offset))
        except OSError:
            continue
        return p, p + offset
    raise RuntimeError(f"found no two free ports {offset} apart on {LOOPBACK}")


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


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().decode(errors="replace")
        return state[state.rindex(")") + 2] != "Z"
    except OSError:
        return False


def kill_tree(pid: int, grace: float = 5.0) -> None:
    """Stop ``pid``, its process group (``pid`` must have been started with
    ``start_new_session=True``: its group id is its pid, so orphans whose parent already
    exited are still found) and every live descendant, including those that left the
    group (pyspark's daemon calls ``setpgid``).  TERM first, KILL after ``grace``."""
    pids = [pid, *descendants(pid)]
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
            if not any(alive(p) for p in pids):
                return
            time.sleep(0.05)


def stop_process(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """TERM, wait ``grace`` seconds, then KILL: for single-process servers whose data is
    throw-away (a graceful shutdown that hangs is not worth waiting for)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def parent_death_signal() -> Callable[[], None] | None:
    """Linux: a ``preexec_fn`` that makes the kernel SIGTERM the child when the process that
    started it dies, even by SIGKILL. libc is loaded here, in the parent, so that the child
    runs one C call between fork and exec (no imports there: other threads may hold locks)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    sigterm = int(signal.SIGTERM)

    def preexec() -> None:  # pragma: no cover - runs in the child
        prctl(pr_set_pdeathsig, sigterm, 0, 0, 0)

    return preexec


def short_tempdir(prefix: str) -> Path:
    """A fresh temp folder with a short path: Unix socket paths are limited to ~107 bytes,
    and some servers put several under their work folder."""
    base = tempfile.gettempdir()
    if len(base) > 40 and os.path.isdir("/tmp") and os.access("/tmp", os.W_OK):
        base = "/tmp"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


def tail(path: Path, lines: int = 60) -> str:
    """The last ``lines`` lines of a log file, or why there are none."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<no log: {exc}>"
    return "\n".join(text.splitlines()[-lines:])
