"""A process that runs one scoped consistent push, held open between its start and its data.

``python -m tests.connector.partitions.scoped_push_worker PATH DAY ID…`` starts a push that
replaces day ``DAY`` (ISO) with rows ``ID…``, prints its entry id (or the error that refused
it, as one JSON line), then waits for a line on stdin before it writes its data and
completes: a test holds the push open as long as it likes, or SIGKILLs it there."""

from __future__ import annotations

import datetime as dt
import json
import sys

import pyarrow as pa
import pyarrow.compute as pc

from mvtable.connector import recovery, scoped_push, writes
from mvtable.errors import MvTableError
from mvtable.storage import open_file_io

SCHEMA = pa.schema([("day", pa.date32()), ("id", pa.int64()), ("v", pa.string())])


def main() -> None:
    path, day, ids = sys.argv[1], dt.date.fromisoformat(sys.argv[2]), [int(i) for i in sys.argv[3:]]
    data = pa.table({"day": [day] * len(ids), "id": ids, "v": [f"pushed by {sys.argv[2]}"] * len(ids)}, schema=SCHEMA)
    scope = scoped_push.request(data, replace_where=pc.field("day") == day, partition_overwrite=None)
    try:
        plan = writes.begin_write(
            path, storage_options=None, incoming=SCHEMA, mode="overwrite", consistent_push=True, scope=scope
        )
    except MvTableError as exc:
        error = {"error": type(exc).__name__, "message": exc.message}
        error.update({k: getattr(exc, k) for k in ("owner", "partitions", "entry_id") if hasattr(exc, k)})
        print(json.dumps(error, default=list), flush=True)
        return
    io = open_file_io(path, {})
    with recovery.keep_lease(io, plan.entry_id, lease_ms=plan.lease_ms):
        print(json.dumps({"entry": plan.entry_id}), flush=True)
        sys.stdin.readline()  # held until the test says go (or kills this process)
        segments = writes.write_data(plan, data.to_batches())
        result = writes.finish_write(plan, segments)
    print(json.dumps({"done": result.commit.version}), flush=True)


if __name__ == "__main__":
    main()
