"""Every "did nothing" says why: vacuum, GC and compaction name what held them back (pins
with owner, version and expiry; retention; grace periods; thresholds), ``mvtable pins``
lists and releases pins, ``inspect`` lists them, and the CLI speaks in flags and human
units."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.holds import format_duration
from mvtable.connector.pinning import pin_version
from mvtable.errors import SchemaMismatchError

from .conftest import orders
from .test_cli import run, run_json


@pytest.fixture
def replaced(tmp_path) -> Table:
    """Versions 0-1 appended, version 2 overwrote them: their files wait for vacuum."""
    t = Table.create(str(tmp_path / "t"), schema=orders(0, 1).schema)
    t.append(orders(0, 10))
    t.append(orders(10, 10))
    t.overwrite(orders(100, 5))
    return t


def test_vacuum_and_gc_name_the_pin_that_held_them_back(replaced):
    t = replaced
    pin = pin_version(t.io, 0, owner="Spark read", ttl_s=3600)
    dry = t.vacuum(retention="0s", force=True, dry_run=True)
    assert not [f for f in dry.files if f.startswith("data/")]  # the pinned version's segments stay
    [hold] = [h for h in dry.held_back if h.kind == "pin"]
    assert (hold.pin_id, hold.version) == (pin.pin_id, 0) and hold.owner.startswith("Spark read")
    assert hold.expires_ms is not None and "holds version 0 until" in hold.reason and re.search(r", in (1h|59m)", hold.reason)
    real = t.vacuum(retention="0s", force=True)
    assert any(h.kind == "pin" for h in real.held_back)  # real runs say it too

    t.io.delete([f"_mvtable/pins/{pin.pin_id}.json"])
    freed = t.vacuum(retention="0s", force=True)
    assert [f for f in freed.files if f.startswith("data/")] and not [h for h in freed.held_back if h.kind == "pin"]


def test_gc_names_the_pin_and_the_missing_checkpoint(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=orders(0, 1).schema, properties={"versionRetentionPeriod": "0s"})
    for i in range(3):
        t.append(orders(i * 10, 10))
        t.delete(pc.field("id") == i * 10)  # each delete supersedes the segment's DV file
    pin_version(t.io, 1, owner="nightly report", ttl_s=3600)
    for report in (t.collect_garbage(dry_run=True), t.collect_garbage()):
        kinds = {h.kind: h for h in report.held_back}
        assert kinds["pin"].version == 1 and kinds["pin"].owner.startswith("nightly report")
        assert "no checkpoint at or below the safe version 1" in kinds["checkpoint"].reason


def test_retention_is_named_when_it_keeps_versions(replaced):
    report = replaced.vacuum(dry_run=True)  # the table's 7d
    [hold] = [h for h in report.held_back if h.kind == "retention"]
    assert "inside the retention window (7d)" in hold.reason and hold.version == 0


def test_cli_vacuum_says_why_in_human_units(replaced):
    t = replaced
    pin_version(t.io, 0, owner="Spark read", ttl_s=3600)
    out = run("vacuum", t.uri, "--dry-run", "--retention", "0s", "--force")
    assert out.returncode == 0, out.stderr
    assert "retention 0s" in out.stdout and "kept because:" in out.stdout
    assert "of 'Spark read (pid " in out.stdout and "holds version 0 until" in out.stdout
    assert "mvtable pins URI --release OWNER" in out.stdout
    default = run("vacuum", t.uri, "--dry-run")
    assert "retention 7d" in default.stdout and "604800" not in default.stdout
    gc = run("gc", t.uri, "--dry-run")
    assert "kept because:" in gc.stdout
    [report] = run_json("vacuum", t.uri, "--dry-run", "--retention", "0s", "--force")
    assert [h["owner"].startswith("Spark read") for h in report["held_back"] if h["kind"] == "pin"] == [True]


def test_pins_lists_and_releases_and_inspect_shows_them(replaced):
    t = replaced
    pin_version(t.io, 0, owner="dead job", ttl_s=3600)
    [record] = run_json("pins", t.uri)
    assert (
        record["owner"].startswith("dead job") and record["version"] == 0 and record["expires_in"] in ("59m 59s", "59m 58s", "1h")
    )
    listed = run("pins", t.uri)
    assert "dead job" in listed.stdout and "--release OWNER" in listed.stdout
    [info] = run_json("inspect", t.uri)
    assert [p["owner"] for p in info["pins"]] == [record["owner"]]
    assert "dead job" in run("inspect", t.uri).stdout

    missing = run("pins", t.uri, "--release", "nobody")
    assert missing.returncode == 1 and "PinNotFoundError" in missing.stderr and record["owner"] in missing.stderr
    released = run("pins", t.uri, "--release", record["owner"])
    assert released.returncode == 0 and "released 1 pin(s)" in released.stdout
    assert run_json("pins", t.uri) == [] and "none" in run("pins", t.uri).stdout
    assert [f for f in t.vacuum(retention="0s", force=True).files if f.startswith("data/")]


def test_compaction_says_why_there_is_nothing_to_compact(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=orders(0, 1).schema)
    for i in range(3):
        t.append(orders(i * 10, 10))
    report = t.compact(dry_run=True)
    assert report.bins == 0
    assert any("3 small segment(s)" in r and "compactMinInputFiles=5" in r for r in report.reasons), report.reasons
    out = run("compact", t.uri, "--dry-run")
    assert out.stdout.startswith("dry run: nothing to compact: 3 small segment(s)") or "nothing to compact: 3 small" in out.stdout
    assert "--min-input-files N" in out.stdout and "compactDeleteRatio=0.2" in out.stdout
    assert t.compact(min_input_files=3, dry_run=True).bins == 1  # what the reason says works
    assert run_json("compact", t.uri, "--dry-run")[0]["reasons"]


def test_cli_errors_speak_in_flags(replaced, tmp_path):
    short = run("vacuum", replaced.uri, "--retention", "1h")
    assert short.returncode == 1 and "--force" in short.stderr and "force=True" not in short.stderr
    missing = run("inspect", str(tmp_path / "nope"))
    assert missing.returncode == 1 and "Table.create" not in missing.stderr and "no mvtable table at" in missing.stderr
    failure = json.loads(run("vacuum", replaced.uri, "--retention", "1h", "--json").stdout)
    assert "force=True" not in failure["error"] and "[MVTABLE_RETENTION_TOO_SHORT]" in failure["error"]


def test_the_python_api_names_types_as_arrow_does(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64()), ("data", pa.int32())]))
    with pytest.raises(SchemaMismatchError) as info:
        t.append(pa.table({"id": pa.array(["x"]), "data": pa.array([1], pa.int32())}))
    assert "id (table: int64, data: string)" in str(info.value)
    assert "long" not in str(info.value) and "integer" not in str(info.value)


def test_format_duration():
    assert [format_duration(s) for s in (0, 45, 3600, 5400, 604800, 90061)] == ["0s", "45s", "1h", "1h 30m", "7d", "1d 1h"]


@pytest.mark.spark
def test_the_sql_procedures_say_what_held_them_back(spark, replaced):
    from mvtable.connector import register

    register(spark)
    t = replaced
    pin_version(t.io, 0, owner="dashboard", ttl_s=3600)
    [row] = spark.sql(
        f"SELECT * FROM mvtable_vacuum(table => '{t.uri}', retention => '0s', force => true, dry_run => true)"
    ).collect()
    assert "kept because: pin " in row.message and "of 'dashboard (pid " in row.message and "holds version 0" in row.message
    [row] = spark.sql(f"SELECT * FROM mvtable_compact(table => '{t.uri}', dry_run => true)").collect()
    assert row.message.startswith("nothing to compact: ") and "compactMinInputFiles=5" in row.message
