"""Which Parquet codec segments use: ``python -m benchmarks.codecs [--sf 1] [--rows N]``.

Writes lineitem with mvtable's segment writer once per codec (zstd at levels 1, 3 and
pyarrow's default, lz4, snappy, none) and prints, per codec, the write time, the time to
read the file back with ``pyarrow.parquet`` (what ``Table.scan`` decodes), and the bytes,
as a Markdown table. One process, codecs interleaved over ``--repeat`` rounds, medians.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from .data import generate, load_lineitem, sf_label

CODECS: dict[str, dict[str, object]] = {
    "zstd (default level)": {"compression": "zstd"},
    "zstd level 1": {"compression": "zstd", "compression_level": 1},
    "zstd level 3": {"compression": "zstd", "compression_level": 3},
    "lz4": {"compression": "lz4"},
    "snappy": {"compression": "snappy"},
    "none": {"compression": "none"},
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.codecs", description=__doc__)
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--rows", type=int, default=2_000_000, help="rows of lineitem to write per codec (default 2M)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--row-group-rows", type=int, default=131072)
    p.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parent / "data")
    a = p.parse_args(argv)
    from mvtable.connector.segments import parquet_writer_options

    data = load_lineitem(generate(a.sf, a.data_dir / f"sf{sf_label(a.sf)}" / "tpch")).slice(0, a.rows)
    work = Path(tempfile.mkdtemp(prefix="mvtable-codecs-"))
    times: dict[str, dict[str, list[float]]] = {c: {"write": [], "read": []} for c in CODECS}
    sizes: dict[str, int] = {}
    try:
        for _ in range(a.repeat):
            for codec, extra in CODECS.items():
                path = work / "seg.parquet"
                options = {**parquet_writer_options(), **extra}
                start = time.perf_counter()
                pq.write_table(data, path, row_group_size=a.row_group_rows, **options)
                times[codec]["write"].append(time.perf_counter() - start)
                start = time.perf_counter()
                pq.read_table(path)
                times[codec]["read"].append(time.perf_counter() - start)
                sizes[codec] = os.path.getsize(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"lineitem SF {a.sf:g}, {data.num_rows} rows, row groups of {a.row_group_rows}, load {os.getloadavg()[0]:.1f}")
    print("| codec | write s | read s | MiB |")
    print("|---|---|---|---|")
    for codec in CODECS:
        w, r = statistics.median(times[codec]["write"]), statistics.median(times[codec]["read"])
        print(f"| {codec} | {w:.2f} | {r:.2f} | {sizes[codec] / 2**20:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
