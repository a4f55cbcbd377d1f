"""``mvtable timeline``: the table for people, ``--json`` for scripts, ``--html`` for a browser, ``--version`` for time travel."""

from __future__ import annotations

import json

import pytest

from mvtable.connector import Table

from ..conftest import orders
from ..test_cli import CLI, assert_clean_error, run, run_json


@pytest.fixture
def pushed(table_uri) -> Table:
    """v1/v2 appends, v3/v4 a consistent push over them, v5 an append, v6/v7 a staged push."""
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "100"})
    t.append(orders(0, 100))
    t.append(orders(100, 100))
    t.overwrite(orders(500, 30), consistent_push=True)
    t.append(orders(600, 7))
    t.overwrite(orders(700, 9), consistent_push=True, publish=False)
    assert t.version == 7
    return t


def test_the_table_for_people(pushed, table_uri):
    proc = run("timeline", table_uri)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].strip() == f"timeline of {table_uri} at version 7"
    header = next(line for line in lines if "partition" in line and "visible segments" in line)
    for column in ("rows", "deleted", "size", "overshadowed", "staged", "newest version"):
        assert column in header
    [row] = [line for line in lines if "(all)" in line]
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[0] == "(all)"
    assert (cells[1], cells[2], cells[3], cells[5], cells[6], cells[7]) == ("2", "37", "0", "2", "1", "v7")


def test_json_for_scripts_names_every_segment_and_its_versions(pushed, table_uri):
    [doc] = run_json("timeline", table_uri)
    assert doc["version"] == 7
    [part] = doc["partitions"]
    assert (part["label"], part["visible_segments"], part["rows"], part["overshadowed_segments"], part["staged_segments"]) == (
        "(all)",
        2,
        37,
        2,
        1,
    )
    states = {s["id"]: (s["state"], s["added_version"], s["replaced_version"]) for s in part["segments"]}
    assert sorted(states.values()) == [
        ("overshadowed", 1, 4),
        ("overshadowed", 2, 4),
        ("staged", 7, None),
        ("visible", 4, None),
        ("visible", 5, None),
    ]
    assert {sid for sid, (state, *_) in states.items() if state == "visible"} == set(pushed.snapshot().visible_segment_ids())


def test_version_shows_the_timeline_as_it_was(pushed, table_uri):
    [doc] = run_json("timeline", table_uri, "--version", "2")
    [part] = doc["partitions"]
    assert doc["version"] == 2
    assert [(s["state"], s["added_version"]) for s in part["segments"]] == [("visible", 1), ("visible", 2)]


def test_html_writes_one_self_contained_page(pushed, table_uri, tmp_path):
    out = tmp_path / "timeline.html"
    proc = run("timeline", table_uri, "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout
    page = out.read_text(encoding="utf-8")
    assert page.count("data-segment-id=") == 5
    assert page.count('data-state="visible"') == 2 and page.count('data-state="staged"') == 1
    assert "<script" not in page and "src=" not in page

    # with --json, stdout stays one JSON document
    again = tmp_path / "again.html"
    proc = run("timeline", table_uri, "--html", str(again), "--json", "--max-partitions", "1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["version"] == 7
    assert again.read_text(encoding="utf-8") == page  # one partition: the cap leaves it whole


def test_the_console_script_runs_it(pushed, table_uri):
    proc = run("timeline", table_uri, "--json", cmd=CLI)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["partitions"][0]["label"] == "(all)"


def test_errors_are_clean(pushed, table_uri, tmp_path):
    assert_clean_error(run("timeline", table_uri, "--version", "99"), 1, "VersionNotFoundError", "hint:")
    assert_clean_error(run("timeline", str(tmp_path / "nothing")), 1, "TableNotFoundError")
    assert_clean_error(run("timeline", table_uri, "--max-partitions", "0"), 2, "--max-partitions")
    missing = tmp_path / "no" / "such"
    assert_clean_error(
        run("timeline", table_uri, "--html", str(missing / "t.html")), 1, "InvalidOptionError", f"folder {missing} does not exist"
    )
    assert_clean_error(run("timeline", table_uri, "--html", str(tmp_path)), 1, "is a folder")
    assert not missing.exists()
