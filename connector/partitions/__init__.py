"""Partitioned tables: a partition spec, Iceberg's transforms, and what every capability does with them.

A table may be created with a partition spec (``Table.create(…, partition_by=["day(ts)",
"region"])``). Each spec field is a column or an Iceberg transform of one (``year``,
``month``, ``day``, ``hour``, ``bucket[N]``, ``truncate[W]``) with Iceberg's exact
semantics, so an Iceberg export carries the same spec and its readers prune the same way.
Every segment holds the rows of exactly one partition, and the log records that
partition's values with the segment: pruning a scan by partition reads no statistic and no
file, and replacing one partition (a scoped consistent push) is a metadata change.
"""
