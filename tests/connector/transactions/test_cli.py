"""``mvtable rollback URI --transaction ID`` and what ``lineage`` / ``history`` show of a transaction."""

from __future__ import annotations

import contextlib
import io
import json

import pyarrow as pa

import mvtable
from mvtable.connector import Table
from mvtable.connector.cli import main


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_rollback_a_transaction_from_the_command_line(tmp_path):
    a, b = Table(str(tmp_path / "a")), Table(str(tmp_path / "b"))
    for t in (a, b):
        t.append(pa.table({"id": [1]}))
    with mvtable.transaction() as tx:
        tx.append(a, pa.table({"id": [2]}))
        tx.overwrite(b, pa.table({"id": [3]}))
    code, out, _ = cli("lineage", b.uri, "--json")
    assert code == 0 and [e["id"] for e in json.loads(out)] == [tx.id]
    code, out, _ = cli("history", a.uri, "--json")
    assert code == 0 and [h["parameters"].get("transaction") for h in json.loads(out)[-2:]] == [tx.id, tx.id]
    code, out, err = cli("rollback", b.uri, "--transaction", tx.id, "--json")
    assert code == 0, err
    (result,) = json.loads(out)
    assert result["outcome"] == "ROLLED_BACK" and {uri for uri, _ in result["versions"]} == {a.io.uri, b.io.uri}
    assert a.to_arrow().column("id").to_pylist() == [1] and b.to_arrow().column("id").to_pylist() == [1]
    code, out, _ = cli("rollback", a.uri, "--transaction", tx.id)  # again: nothing more, still exit 0
    assert code == 0 and "ROLLED_BACK" in out
    code, _, err = cli("rollback", a.uri, "--entry", tx.id)  # one table's part alone: refused
    assert code == 1 and "roll the transaction back as one" in err
    code, _, err = cli("rollback", a.uri, "--transaction", "txn-20260101T000000-00000000")
    assert code == 1 and "TransactionNotFoundError" in err
