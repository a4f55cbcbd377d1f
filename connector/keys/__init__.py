"""Primary keys: duplicate-free appends, upsert and delete by key, checked at commit.

A keyed table (``Table.create(…, primary_key=["id"])``) keeps, for every segment, the
min/max of the key columns per row group (in the segment descriptor's statistics) and a
Bloom filter of the segment's keys in a file beside it (``mvtable.connector.key_index``,
over the stable 64-bit hash of ``mvtable.connector.key_hashing``). A key lookup
(``lookup``) reads the key columns of candidate row groups only. An upsert deletes
by physical address and appends in one commit, and every commit that appends keyed rows
records a filter of their keys; a commit checks its keys against every commit since it looked (the rule lives in
``mvtable.lineage.key_filters``), so two writers inserting the same new key can never both
land. Modules: ``validate`` (what may be a key, bad input), ``lookup``, ``commit`` (keyed
commits and the append checks), and the two lifecycle commits that make rows visible
again or later: ``publish`` (a staged push) and ``rollback`` (a completed push's replaced
rows), each checked against every commit since.

This package sits between the segments and the write protocol: the segment writer builds
the key index (so the index and the hash live below it, outside this package), and
``writes`` checks keyed commits here (``commit``), so upsert and delete by key, which use the write
protocol, live above it (``mvtable.connector.upsert``). Submodules are imported by name
(``from mvtable.connector.keys import lookup``).
"""
