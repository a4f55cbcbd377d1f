"""Primary keys: duplicate-free appends, upsert and delete by key, checked at commit.

A keyed table (``Table.create(…, primary_key=["id"])``) keeps, for every segment, the
min/max of the key columns per row group (in the segment descriptor's statistics) and a
Bloom filter of the segment's keys in a file beside it (``index``). A key lookup
(``lookup``) reads the key columns of candidate row groups only. An upsert deletes
by physical address and appends in one commit, and every commit that appends keyed rows
records a filter of their keys; a commit checks its keys against every commit since it looked (the rule lives in
``mvtable.lineage.key_filters``), so two writers inserting the same new key can never both
land. Modules: ``validate`` (what may be a key, bad input), ``hashing`` (a stable 64-bit
key hash), ``index``, ``lookup``, ``writes`` (keyed commits and the append checks),
``upsert`` (upsert and delete by key), and the two lifecycle commits that make rows visible
again or later: ``publish`` (a staged push) and ``rollback`` (a completed push's replaced
rows), each checked against every commit since.

Submodules are imported by name (``from mvtable.connector.keys import index``): the segment
writer imports ``index``, and ``lookup`` imports the segment reader.
"""
