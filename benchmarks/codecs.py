"""Which Parquet codec segments use: ``python -m benchmarks.codecs [--sf 1] [--rows N]``.

Writes lineitem with mvtable's segment writer options once per codec variant (the default:
zstd with the dictionary-encoded columns snappy; zstd everywhere, as before; lz4, snappy or
nothing on the dictionary columns or everywhere; dictionary pages where the segment writer
puts them, ``segment_encoding.dictionary_columns_for``) and once with dictionary pages on
every column (pyarrow's default), and prints, per variant, the write
CPU and wall time, the wall and CPU time to read the file back with ``pyarrow.parquet`` (what
``Table.scan`` decodes), and the bytes, as a Markdown table. One process, variants
interleaved over ``--repeat`` rounds, medians. Then the same for a small segment
(``--small-rows``, a small append): encode CPU and bytes per codec.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .data import generate, load_lineitem, sf_label

# Each variant: (codec of the dictionary-encoded columns, codec of the other non-delta
# columns, extra writer options). Delta-packed columns stay uncompressed in every variant
# but the last two, which turn delta packing off.
CODECS: dict[str, tuple[str | None, str | None, dict[str, object]]] = {
    "default: zstd, dictionary columns snappy": (None, None, {}),
    "zstd everywhere (before)": ("zstd", "zstd", {}),
    "zstd, dictionary columns lz4": ("lz4", "zstd", {}),
    "zstd, dictionary columns uncompressed": ("none", "zstd", {}),
    "zstd level 3, dictionary columns snappy": (None, None, {"compression_level": 3}),
    "lz4": ("lz4", "lz4", {}),
    "snappy": ("snappy", "snappy", {}),
    "none": ("none", "none", {}),
    "zstd, plain integers (no delta encoding)": ("zstd", "zstd", {"column_encoding": None, "all": "zstd"}),
    "zstd, dictionary on every column": ("zstd", "zstd", {"column_encoding": None, "use_dictionary": True, "all": "zstd"}),
}


def variant_options(
    base: dict[str, object], dictionary: object, variant: tuple[str | None, str | None, dict[str, object]]
) -> dict[str, object]:
    """The segment writer's options (``base``) with one variant's codecs."""
    on_dictionary, on_rest, extra = variant
    extra = dict(extra)
    everything = extra.pop("all", None)
    options = {**base, **extra}
    if options.get("column_encoding") is None:
        options.pop("column_encoding", None)
    if everything is not None:
        options["compression"] = everything
        return options
    codecs = dict(base["compression"])  # type: ignore[call-overload]
    picked = set(dictionary) if isinstance(dictionary, list) else set()
    for name, codec in codecs.items():
        if codec == "none":
            continue  # delta-packed
        if name in picked and on_dictionary is not None:
            codecs[name] = on_dictionary
        elif name not in picked and on_rest is not None:
            codecs[name] = on_rest
    options["compression"] = codecs
    if "compression_level" in options:  # a level for the zstd columns only
        level = options["compression_level"]
        options["compression_level"] = {name: level for name, codec in codecs.items() if codec == "zstd"}
    return options


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.codecs", description=__doc__)
    p.add_argument("--sf", type=float, default=1.0)
    p.add_argument("--rows", type=int, default=2_000_000, help="rows of lineitem to write per codec (default 2M)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--row-group-rows", type=int, default=131072)
    p.add_argument("--small-rows", type=int, default=1000, help="rows of the small-segment table (default 1000)")
    p.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parent / "data")
    a = p.parse_args(argv)
    from mvtable.connector.segment_encoding import dictionary_columns_for, parquet_writer_options

    data = load_lineitem(generate(a.sf, a.data_dir / f"sf{sf_label(a.sf)}" / "tpch")).slice(0, a.rows)
    work = Path(tempfile.mkdtemp(prefix="mvtable-codecs-"))
    dictionary = dictionary_columns_for(data.slice(0, a.row_group_rows))
    times: dict[str, dict[str, list[float]]] = {c: {"write": [], "cpu": [], "read": [], "read_cpu": []} for c in CODECS}
    sizes: dict[str, int] = {}
    try:
        for _ in range(a.repeat):
            for codec, variant in CODECS.items():
                path = work / "seg.parquet"
                options = variant_options(
                    parquet_writer_options(use_dictionary=dictionary, schema=data.schema), dictionary, variant
                )
                start, cpu = time.perf_counter(), time.process_time()
                pq.write_table(data, path, row_group_size=a.row_group_rows, **options)
                times[codec]["write"].append(time.perf_counter() - start)
                times[codec]["cpu"].append(time.process_time() - cpu)
                start, cpu = time.perf_counter(), time.process_time()
                pq.read_table(path)
                times[codec]["read"].append(time.perf_counter() - start)
                times[codec]["read_cpu"].append(time.process_time() - cpu)
                sizes[codec] = os.path.getsize(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"lineitem SF {a.sf:g}, {data.num_rows} rows, row groups of {a.row_group_rows}, load {os.getloadavg()[0]:.1f}")
    print(f"dictionary pages on: {dictionary if isinstance(dictionary, bool) else ', '.join(dictionary)}")
    print("| codec | write s | write CPU s | read s | read CPU s | MiB |")
    print("|---|---|---|---|---|---|")
    for codec in CODECS:
        w, c, r, rc = (statistics.median(times[codec][k]) for k in ("write", "cpu", "read", "read_cpu"))
        print(f"| {codec} | {w:.2f} | {c:.2f} | {r:.2f} | {rc:.2f} | {sizes[codec] / 2**20:.1f} |")
    small_segments(data.slice(0, a.small_rows), parquet_writer_options())
    return 0


def small_segments(small: pa.Table, options: dict[str, object], *, runs: int = 100) -> None:
    """A small append's encode (``segment_encoding.SMALL_SEGMENT_ROWS``): CPU per write of
    ``small`` into memory, median of ``runs``, and the bytes, per codec."""
    print(f"\nsmall segment: {small.num_rows} rows, dictionary on every column")
    print("| codec | write CPU ms | KiB |")
    print("|---|---|---|")
    for codec in ("zstd", "snappy", "lz4", "none"):
        cpu: list[float] = []
        for _ in range(runs):
            sink = pa.BufferOutputStream()
            start = time.process_time()
            pq.write_table(small, sink, **{**options, "compression": codec})
            cpu.append(time.process_time() - start)
        print(f"| {codec} | {statistics.median(cpu) * 1000:.2f} | {sink.getvalue().size / 1024:.1f} |")


if __name__ == "__main__":
    raise SystemExit(main())
