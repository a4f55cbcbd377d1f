"""A commit naming many segments is followed by a checkpoint, so later opens do not parse it action by action."""

from __future__ import annotations

import os

import pyarrow as pa

from mvtable import Table
from mvtable.lineage.log import BIG_COMMIT_ACTIONS, checkpoint_path


def test_a_big_commit_is_checkpointed_and_a_small_one_is_not(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("k", pa.int64()), ("v", pa.int64())]), partition_by=["k"])
    t.append(pa.table({"k": [1, 2], "v": [1, 2]}))  # version 1: two segments
    assert not os.path.exists(os.path.join(t.uri, checkpoint_path(1)))
    n = BIG_COMMIT_ACTIONS
    t.append(pa.table({"k": list(range(n)), "v": list(range(n))}))  # version 2: one segment per key
    assert os.path.exists(os.path.join(t.uri, checkpoint_path(2)))
    assert Table.open(t.uri).to_arrow().num_rows == n + 2
    assert t.commit_log.read_checkpoint(2).version == 2
