"""``mvtable compact``: dry run, JSON for scripts, progress on request, typed usage errors."""

from __future__ import annotations

import pyarrow.compute as pc

from mvtable.connector import Table

from .conftest import orders
from .test_cli import assert_clean_error, run, run_json


def test_compact_command(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "50"})
    for i in range(6):
        t.append(orders(i * 20, 20))
    t.delete(pc.field("id") < 5)
    version = t.version

    (dry,) = run_json("compact", table_uri, "--dry-run")
    assert dry["dry_run"] and dry["bins"] == 1 and dry["input_segments"] == 6 and dry["commits"] == []
    assert dry["changed"] is False and t.version == version

    human = run("compact", table_uri, "--progress", "always", "--target-size", "1MiB")
    assert human.returncode == 0, human.stderr
    assert "rewrote 6 segment(s) in 1 bin(s) into 1, 1 commit(s); 5 deleted row(s) purged" in human.stdout
    assert "compact" in human.stderr  # the progress bar
    assert t.version == version + 1 and sorted(t.to_arrow()["id"].to_pylist()) == list(range(5, 120))

    (again,) = run_json("compact", table_uri)
    assert again["bins"] == 0 and again["changed"] is False and again["complete"] is True
    assert "nothing to compact" in run("compact", table_uri).stdout

    assert_clean_error(run("compact", table_uri, "--target-size", "lots"), 1, "SettingsError", "--target-size")
    assert_clean_error(run("compact", table_uri, "--min-input-files", "0"), 2)
