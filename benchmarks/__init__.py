"""mvtable benchmarks: TPC-H lineitem through mvtable, native Parquet and peer formats.

Run ``python -m benchmarks.run --help``; see ``benchmarks/README.md``. Nothing here is a
timed test: the smoke mode (``--smoke``) only checks that every case runs and answers
correctly (``tests/benchmarks/test_smoke.py``)."""
