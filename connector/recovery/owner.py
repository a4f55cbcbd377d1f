"""Who is writing, and whether a recorded writer still runs (Linux ``/proc``).

A push records its owner as (host, machine, pid, process start time). ``machine`` is the
kernel boot id plus the pid namespace, so two containers that share a hostname, or a host
that rebooted, never count as "the same host": only then can a missing process prove its
push dead. The start time (``/proc/<pid>/stat`` field 22, clock ticks since boot) tells a
reused pid from the original process. Without ``/proc`` (macOS, Windows) nothing can be
proved and recovery waits for the lease.
"""

from __future__ import annotations

import hashlib
import os
import socket
from functools import lru_cache

from mvtable.lineage.actions import PushOwner

PROC = "/proc"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


@lru_cache(maxsize=1)
def machine_id() -> str:
    """This machine and pid namespace, or ``""`` when it cannot be told (no ``/proc``)."""
    boot = (_read(f"{PROC}/sys/kernel/random/boot_id") or "").strip()
    try:
        pid_ns = os.readlink(f"{PROC}/self/ns/pid")
    except OSError:
        pid_ns = ""
    if not boot or not pid_ns:
        return ""
    return hashlib.sha256(f"{socket.gethostname()}|{boot}|{pid_ns}".encode()).hexdigest()[:32]


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(command name, parent pid, start time in clock ticks) of ``pid``, or ``None`` when it does not run.

    Not running means no such process, or a zombie (dead, its exit not yet collected by its
    parent — a killed driver whose parent was killed too stays one for a moment)."""
    text = _read(f"{PROC}/{pid}/stat")
    if not text:
        return None
    # "pid (comm) state ppid …": comm may hold spaces and parentheses, so split at the last ")"
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    try:
        if fields[0] in ("Z", "X"):
            return None
        return head.partition("(")[2], int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def process_owner(pid: int | None = None) -> PushOwner:
    """The owner record for process ``pid`` (this one by default)."""
    pid = os.getpid() if pid is None else pid
    stat = _stat(pid)
    machine = machine_id()
    return PushOwner(
        host=socket.gethostname()[:255],
        machine=machine or None,
        pid=pid,
        start_ticks=stat[2] if stat and machine else None,
    )


def spark_driver_owner() -> PushOwner:
    """The owner of a push planned in a Spark Python worker: the nearest ``java`` ancestor, the driver JVM.

    The worker itself exits as soon as planning is done. Falls back to a lease-only owner
    (no pid) when there is no such ancestor to be found."""
    pid = os.getppid()
    for _ in range(16):
        stat = _stat(pid)
        if stat is None:
            break
        if stat[0] == "java":
            return process_owner(pid)
        if stat[1] <= 1:
            break
        pid = stat[1]
    return PushOwner(host=socket.gethostname()[:255], machine=None, pid=None, start_ticks=None)


def probe(owner: PushOwner | None) -> tuple[bool, str]:
    """(whether the owner's process is provably gone, what was checked)."""
    if owner is None:
        return False, "no owner recorded (written before mvtable recorded owners)"
    where = f"pid {owner.pid} on {owner.host}" if owner.pid is not None else f"a writer on {owner.host}"
    here = machine_id()
    if owner.pid is None or owner.start_ticks is None or not owner.machine or not here:
        return False, f"{where}: no process to check, the lease decides"
    if owner.machine != here:
        return False, f"{where}: another machine, the lease decides"
    stat = _stat(owner.pid)
    if stat is None:
        return True, f"{where} no longer runs"
    if stat[2] != owner.start_ticks:
        return True, f"{where} no longer runs (the pid now belongs to another process)"
    return False, f"{where} is running"
