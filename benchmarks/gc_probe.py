"""Run one full-table GC in this (fresh) process and print its peak memory as JSON.

``python -m benchmarks.gc_probe <table> <now_ms>``. After the imports and opening the
table, the kernel's peak-RSS mark is reset (``/proc/self/clear_refs``); the GC's figure is
the peak RSS during GC minus the RSS just before it. (``getrusage``'s ``ru_maxrss`` is no
good here: Linux carries it across ``fork``/``exec``, so a child started by a process
holding SF1 in memory would report the parent's peak.)"""

from __future__ import annotations

import gc
import json
import sys
import time


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"{field} not in /proc/self/status")


def main() -> None:
    uri, now_ms = sys.argv[1], int(sys.argv[2])
    import mvtable.connector.gc  # noqa: F401  (import cost is not GC's)
    from mvtable.connector import Table

    table = Table.open(uri)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    base = _status_mib("VmRSS")
    start = time.perf_counter()
    report = table.collect_garbage(now_ms=now_ms)
    seconds = time.perf_counter() - start
    peak = _status_mib("VmHWM")
    print(
        json.dumps(
            {
                "baseline_mib": base,
                "peak_rss_mib": peak,
                "gc_peak_mib": peak - base,
                "seconds": seconds,
                "report": {
                    "dv_files_deleted": report.dv_files_deleted,
                    "log_files_deleted": report.log_files_deleted,
                    "pins_expired": report.pins_expired,
                    "complete": report.complete,
                    "safe_version": report.safe_version,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
