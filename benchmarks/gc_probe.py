"""Run one full-table GC in this (fresh) process and print its peak memory as JSON.

``python -m benchmarks.gc_probe <table> <now_ms>``. The baseline is the peak RSS after
the imports and opening the table; the GC's figure is the peak RSS during GC minus it."""

from __future__ import annotations

import json
import resource
import sys
import time


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    uri, now_ms = sys.argv[1], int(sys.argv[2])
    from mvtable.connector import Table

    table = Table.open(uri)
    base = _peak_mib()
    start = time.perf_counter()
    report = table.collect_garbage(now_ms=now_ms)
    seconds = time.perf_counter() - start
    peak = _peak_mib()
    print(json.dumps({
        "baseline_mib": base, "peak_rss_mib": peak, "gc_peak_mib": peak - base, "seconds": seconds,
        "report": {"dv_files_deleted": report.dv_files_deleted, "log_files_deleted": report.log_files_deleted,
                   "pins_expired": report.pins_expired, "complete": report.complete, "safe_version": report.safe_version},
    }))


if __name__ == "__main__":
    main()
