"""What the tests and the benchmarks start, one module per kind of thing:

* ``spark_session`` — the one in-process ``local[2]`` SparkSession (start, stop, conf).
* ``spark_scripts`` — a Spark driver script in a fresh interpreter (local or on a cluster).
* ``spark_cluster`` — a standalone master + workers on 127.0.0.1 via ``spark-class``.
* ``connect`` — local Spark Connect servers on free ports, and scripts against them in fresh
  interpreters.
* ``spark_jvm`` — how every Spark JVM here is set up (shadow SPARK_HOME, class-data
  archive, quick JIT, loopback environment, shared conf).
* ``wheel_install`` — the project built as a wheel and installed into a folder.
* ``s3_seaweed`` / ``s3_moto`` — S3 servers on loopback; ``s3_server`` — what they share;
  ``s3_fault_proxy`` — an HTTP proxy in front of one that injects S3 faults on a schedule.
* ``process_gang`` — Python processes that race together; ``processes`` — free ports,
  process trees and their cleanup.
* ``forked`` — children forked from a server with mvtable, pyarrow and s3fs imported (the
  kill tests' killed processes).
* ``prestart`` — slow things booted in the background after collection.
* ``fixtures`` — the pytest fixtures (the only module that imports pytest).

Tests import these as ``support.<module>`` (``tests/conftest.py`` puts ``tests/`` on
``sys.path``) or ``tests.support.<module>``; the benchmarks as ``tests.support.<module>``.
Modules import each other relatively, so either name works; the state that must be one
per process (the S3 server registry, the prestarted cluster) is only reached through the
fixtures, which ``tests/conftest.py`` imports once.
"""
