"""The ``mvtable`` command line: its output for people and scripts, and its exit codes.

Most commands run in this process through ``main(argv)``, exactly what the console
script calls, with stdout and stderr captured (a subprocess per command cost ~1 s of
imports each).  Where the process boundary is the point, a subprocess runs: the
installed console script, a reader that closes the pipe, and the racing writer below.

Exit-code contract: 0 ok (idempotent no-ops too), 1 mvtable error, 2 usage error,
3 retryable conflict. Exit code 3 is produced by a real race: a second writer reverts the
same lineage entry between the CLI's read and its commit (the CLI runs in a subprocess
whose ``CommitLog._put`` first lets the other writer commit)."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pyarrow.compute as pc
import pytest

from mvtable.connector import Table, cli

from .conftest import orders

CLI = [sys.executable, "-m", "mvtable.connector.cli"]


_UNSET_ENV = ("COLUMNS", "MVTABLE_FAULT")


def run(*args: str, cmd: list[str] | None = None) -> subprocess.CompletedProcess:
    """``mvtable ARGS`` in this process (piped: no terminal), or ``cmd ARGS`` in a subprocess."""
    if cmd is not None:
        env = {k: v for k, v in os.environ.items() if k not in _UNSET_ENV}
        return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120, env=env)
    saved = {k: os.environ.pop(k) for k in _UNSET_ENV if k in os.environ}
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(args))
    finally:
        os.environ.update(saved)
    return subprocess.CompletedProcess(["mvtable", *args], code, out.getvalue(), err.getvalue())


def run_json(*args: str) -> list[dict]:
    proc = run(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert isinstance(data, list) and all(isinstance(item, dict) for item in data)
    return data


def assert_clean_error(proc: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


@pytest.fixture
def pushed(table_uri):
    """v0 create, v1/v2 appends (1000 + 500 rows), v3 delete (150 rows), v4/v5 consistent
    push A (300 rows, COMPLETED), v6/v7 staged push B (200 rows, IN_PROGRESS)."""
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "100"})
    t.append(orders(0, 1000))
    t.append(orders(1000, 500))
    assert t.delete(pc.field("status") == "cancelled").deleted_rows == 150
    t.overwrite(orders(5000, 300), consistent_push=True)
    t.overwrite(orders(6000, 200), consistent_push=True, publish=False)
    a, b = t.lineage()
    assert (a.state, b.state) == ("COMPLETED", "IN_PROGRESS")
    return t, a.id, b.id


def ids(t: Table) -> list[int]:
    return sorted(t.to_arrow(columns=["id"]).column("id").to_pylist())


def console_script() -> str | None:
    """The installed ``mvtable`` script: beside this interpreter (a venv's ``bin/``, which
    need not be on ``PATH``), else on ``PATH``."""
    beside = shutil.which("mvtable", path=os.path.dirname(sys.executable))
    return beside or shutil.which("mvtable")


def test_console_script_is_installed():
    exe = console_script()
    assert exe is not None, "the `mvtable` entry point is missing: pip install -e . (again)"
    proc = run("--help", cmd=[exe])
    assert proc.returncode == 0
    for command in ("lineage", "history", "rollback", "restore", "publish", "vacuum", "gc", "inspect"):
        assert command in proc.stdout


def test_the_console_script_is_found_when_the_venvs_bin_is_not_on_path(monkeypatch):
    beside = os.path.join(os.path.dirname(sys.executable), "mvtable")  # pip puts it there
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in ("/usr/bin", "/bin") if p != os.path.dirname(sys.executable)))
    assert console_script() == beside


def test_lineage_for_people_and_scripts(pushed):
    t, a, b = pushed
    human = run("lineage", t.uri)
    assert human.returncode == 0, human.stderr
    for fact in (a, b, "COMPLETED", "IN_PROGRESS", *t.lineage()[1].segments_to):
        assert fact in human.stdout

    data = run_json("lineage", t.uri)
    assert [e["id"] for e in data] == [a, b]
    views = t.lineage()
    for item, view in zip(data, views):
        assert set(item) == {
            *("id", "segments_from", "segments_to", "state", "timestamp", "started_version", "state_version"),
            *("owner", "lease_expires", "status", "revert_reason", "scope", "partitions"),
        }
        assert item["scope"] is None and item["partitions"] == []  # whole-table pushes
        assert item["owner"] == view.owner and item["status"] == view.status
        assert item["segments_from"] == list(view.segments_from)
        assert item["segments_to"] == list(view.segments_to)
        assert item["state"] == view.state
        assert dt.datetime.fromisoformat(item["timestamp"]) == view.timestamp
        assert (item["started_version"], item["state_version"]) == (view.started_version, view.state_version)


def test_history_for_people_and_scripts(pushed):
    t, a, _ = pushed
    human = run("history", t.uri)
    assert human.returncode == 0
    for fact in ("CREATE", "APPEND", "DELETE", "CONSISTENT_PUSH", "PUSH_STAGE", f"entry={a}", "deleted_rows=150"):
        assert fact in human.stdout

    data = run_json("history", t.uri)
    assert [h["version"] for h in data] == list(range(t.version + 1))
    assert [h["operation"] for h in data] == [h.operation for h in t.history()]
    assert set(data[3]) == {"version", "timestamp", "operation", "parameters", "metrics", "writer"}
    assert data[3]["metrics"]["deleted_rows"] == 150
    dt.datetime.fromisoformat(data[0]["timestamp"])
    assert [h["version"] for h in run_json("history", t.uri, "--limit", "2")] == [t.version - 1, t.version]


def test_publish_and_rollback_are_idempotent(pushed):
    t, a, b = pushed
    first = run("publish", t.uri, "--entry", b)
    assert first.returncode == 0, first.stderr
    assert "PUBLISH" in first.stdout and "IN_PROGRESS → COMPLETED" in first.stdout
    assert t.lineage()[1].state == "COMPLETED"
    assert ids(t) == list(range(6000, 6200))
    version = t.version

    [again] = run_json("publish", t.uri, "--entry", b)
    assert again == {"operation": "PUBLISH", "version": version, "changed": False, "message": again["message"]}
    assert "already COMPLETED" in again["message"]
    assert t.version == version

    rolled = run("rollback", t.uri, "--entry", b)
    assert rolled.returncode == 0, rolled.stderr
    assert "→ REVERTED" in rolled.stdout and f"committed version {version + 1}" in rolled.stdout
    assert t.lineage()[1].state == "REVERTED"
    assert ids(t) == list(range(5000, 5300))  # push A's data is back

    repeat = run("rollback", t.uri, "--entry", b)
    assert repeat.returncode == 0
    assert repeat.stdout.startswith("nothing changed") and "already REVERTED" in repeat.stdout
    assert t.version == version + 1


def test_rollback_that_the_lineage_forbids_exits_1(pushed):
    t, a, b = pushed
    assert run("publish", t.uri, "--entry", b).returncode == 0  # B replaced A's segments
    version = t.version
    proc = run("rollback", t.uri, "--entry", a)
    assert_clean_error(proc, 1, "InvalidLineageTransitionError", a, f"mvtable lineage {t.uri}")
    assert proc.stdout == ""
    assert t.version == version


def test_restore_and_rollback_to_version(pushed):
    t, _, b = pushed
    before_push = 3  # after the delete, before push A
    # the staged push B holds the segments it replaces: a restore may not remove them
    assert_clean_error(run("restore", t.uri, "--version", str(before_push)), 1, "SegmentInUseError", b)
    t.rollback(entry=b)
    [result] = run_json("restore", t.uri, "--version", str(before_push))
    assert result["operation"] == "RESTORE" and result["changed"] is True
    assert result["version"] == t.version
    expected = [i for i in range(1500) if i % 10]
    assert ids(t) == expected

    again = run("restore", t.uri, "--version", str(before_push))
    assert again.returncode == 0 and again.stdout.startswith("nothing changed")
    [same] = run_json("rollback", t.uri, "--version", str(before_push))
    assert same["changed"] is False and same["version"] == result["version"]
    assert ids(t) == expected


def test_errors_and_usage(pushed, tmp_path):
    t, _, _ = pushed
    assert_clean_error(run("lineage", str(tmp_path / "nope")), 1, "TableNotFoundError", "hint:")
    assert_clean_error(run("restore", t.uri, "--version", "999"), 1, "VersionNotFoundError", f"mvtable history {t.uri}")
    assert_clean_error(run("rollback", t.uri, "--entry", "no-such-entry"), 1, "InvalidLineageTransitionError", "no-such-entry")

    usage = run("rollback", t.uri, "--entry", "x", "--version", "1")  # more usage errors: test_usage_errors_exit_2
    assert usage.returncode == 2 and "not allowed with argument" in usage.stderr and "Traceback" not in usage.stderr


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["frobnicate", "/t"],
        ["rollback", "/t"],
        ["rollback", "/t", "--entry", "x", "--version", "1"],
        ["restore", "/t"],
        ["restore", "/t", "--version", "abc"],
        ["restore", "/t", "--version", "-1"],
        ["publish", "/t"],
        ["history", "/t", "--limit", "0"],
        ["history", "/t", "--storage-option", "no-equals-sign"],
        ["gc", "/t", "--time-budget", "soon"],
        ["gc", "/t", "--time-budget", "nan"],
        ["vacuum", "/t", "--time-budget", "inf"],
    ],
)
def test_usage_errors_exit_2(args, capsys):
    from mvtable.connector.cli import main

    assert main(args) == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "Traceback" not in err


def test_help_exits_0(capsys):
    from mvtable.connector.cli import main

    assert main(["vacuum", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--dry-run" in out and "--retention" in out and "--storage-option" in out


RACE = textwrap.dedent(
    """
    import sys
    from mvtable.connector import Table
    from mvtable.connector.cli import main
    from mvtable.lineage.log import CommitLog

    uri, entry = sys.argv[1], sys.argv[2]
    original = CommitLog._put
    raced = []

    def put_after_a_rival(self, commit, txn, **kwargs):
        if not raced:  # another writer replaces the entry's output first (a plain overwrite)
            raced.append(commit.version)
            rival = Table.open(uri)
            rival.overwrite(rival.scan().to_arrow())
        return original(self, commit, txn, **kwargs)

    CommitLog._put = put_after_a_rival
    sys.exit(main(sys.argv[3:]))
    """
)


def test_conflict_with_a_concurrent_writer_exits_3_then_the_retry_is_refused(pushed):
    t, a, b = pushed
    t.rollback(entry=b)  # so that A may be reverted
    version = t.version
    proc = run(t.uri, a, "rollback", t.uri, "--entry", a, "--json", cmd=[sys.executable, "-c", RACE])
    assert_clean_error(proc, 3, "ConcurrentLineageError", "run the command again")
    failure = json.loads(proc.stdout)  # --json: the failure on stdout too, for scripts
    assert (failure["type"], failure["exit_code"]) == ("ConcurrentLineageError", 3) and "run the command again" in failure["hint"]
    assert t.version == version + 1  # only the rival's commit landed
    assert t.lineage()[0].state == "COMPLETED"

    retry = run("rollback", t.uri, "--entry", a)  # now a plain refusal: the output is gone
    assert retry.returncode == 1 and "removed by the commit" in retry.stderr
    assert t.version == version + 1


def test_inspect(pushed):
    t, a, b = pushed
    visible = t.snapshot().visible_segments()
    human = run("inspect", t.uri, "--row-groups")
    assert human.returncode == 0, human.stderr
    out = human.stdout
    for fact in (
        f"version {t.version}",
        visible[0].id,
        "visible",
        "staged",  # B's segment
        "replaced",  # the segments push A replaced
        "10.0%",  # delete density of the appended segments
        "lineage timeline",
        a,
        b,
        "IN_PROGRESS",
        "COMPLETED",
        "CONSISTENT_PUSH",
        "row groups",
    ):
        assert fact in out, fact

    [info] = run_json("inspect", t.uri)
    assert info["version"] == t.version
    segs = {s["id"]: s for s in info["segments"]}
    [pushed_seg] = [s for s in info["segments"] if s["status"] == "visible"]
    assert pushed_seg["id"] == visible[0].id and pushed_seg["lineage_entry"] == a
    assert pushed_seg["num_rows"] == 300 and len(pushed_seg["row_groups"]) == 3
    assert pushed_seg["row_groups"][1] == {
        "num_rows": 100,
        "first_row": 100,
        "total_byte_size": pushed_seg["row_groups"][1]["total_byte_size"],
    }
    replaced = [s for s in info["segments"] if s["status"] == "replaced"]
    assert sorted(s["num_rows"] for s in replaced) == [500, 1000]
    assert sum(s["deleted_rows"] for s in replaced) == 150
    assert all(s["delete_density"] == pytest.approx(0.1) for s in replaced)
    [staged] = [s for s in info["segments"] if s["status"] == "staged"]
    assert staged["lineage_entry"] == b and staged["num_rows"] == 200
    assert len(segs) == 4
    assert info["totals"] == {
        "segments": 1,
        "num_rows": 300,
        "row_groups": 3,
        "size_bytes": pushed_seg["size_bytes"],
        "deleted_rows": 0,
        "live_rows": 300,
        "delete_density": 0.0,
    }
    entry_a, entry_b = info["lineage"]
    assert entry_a["id"] == a and [(s["version"], s["state"]) for s in entry_a["transitions"]] == [
        (4, "IN_PROGRESS"),
        (5, "COMPLETED"),
    ]
    assert entry_b["id"] == b and [(s["version"], s["state"]) for s in entry_b["transitions"]] == [(6, "IN_PROGRESS")]

    # an older version: before the delete, the appended segments are whole
    [old] = run_json("inspect", t.uri, "--version", "2")
    assert old["totals"]["num_rows"] == 1500 and old["totals"]["deleted_rows"] == 0 and old["lineage"] == []


def test_vacuum(table_uri):
    t = Table.create(
        table_uri,
        schema=orders(0, 1).schema,
        properties={
            "replacedSegmentsRetentionPeriod": "0s",
            "lineageEntryCleanupRetentionPeriod": "0s",
            "checkpointInterval": "2",
        },
    )
    t.append(orders(0, 1000))
    t.overwrite(orders(5000, 300), consistent_push=True)
    t.overwrite(orders(6000, 200), consistent_push=True)
    listing = lambda: sorted(os.listdir(os.path.join(table_uri, "data")) + os.listdir(os.path.join(table_uri, "_mvtable", "log")))
    before, version = listing(), t.version

    [dry] = run_json("vacuum", table_uri, "--dry-run", "--retention", "0s", "--force")
    assert dry["dry_run"] is True and dry["files"] and dry["segments_expired"] == 2 and dry["entries_purged"] == 2
    assert {"files", "bytes", "retention_s", "safe_version", "segments_expired", "entries_purged", "complete", "batches"} <= set(
        dry
    )
    assert listing() == before and t.version == version  # a dry run changes nothing

    assert_clean_error(run("vacuum", table_uri, "--retention", "0s"), 1, "RetentionTooShortError", "--force")

    human = run("vacuum", table_uri, "--retention", "0s", "--force", "--progress", "always")
    assert human.returncode == 0, human.stderr
    assert "deleted" in human.stdout and "2 segment(s) expired" in human.stdout
    assert "vacuum:" in human.stderr  # the progress bars
    assert len(os.listdir(os.path.join(table_uri, "data"))) == 1  # the two replaced segments' files are gone
    assert ids(t) == list(range(6000, 6200))  # the newest version still reads

    # a vacuum plans before its own retention commit (so its dry run is exact): the log files
    # that commit frees go in the next run, and then there is nothing left
    for _ in range(3):
        again = run("vacuum", table_uri, "--retention", "0s", "--force")
        assert again.returncode == 0 and "0 segment(s) expired" in again.stdout or "nothing to vacuum" in again.stdout
        assert all(
            f.startswith("_mvtable/log/")
            for f in run_json("vacuum", table_uri, "--dry-run", "--retention", "0s", "--force")[0]["files"]
        )
    assert "nothing to vacuum" in again.stdout
    assert ids(t) == list(range(6000, 6200))


def test_gc(table_uri):
    t = Table.create(
        table_uri,
        schema=orders(0, 1).schema,
        properties={"rowGroupRows": "100", "dvInlineMaxBytes": "0", "versionRetentionPeriod": "0s"},
    )
    t.append(orders(0, 1000))
    t.delete(pc.field("id") < 10)
    first_dv = next(iter(t.snapshot().dvs.values())).path
    t.delete(pc.field("id") < 20)  # a cumulative DV supersedes the first one
    assert first_dv and os.path.exists(os.path.join(table_uri, first_dv))

    [dry] = run_json("gc", table_uri, "--dry-run")
    assert dry["dry_run"] is True and first_dv in dry["deleted"] and dry["dv_files_deleted"] >= 1
    assert {"safe_version", "dv_files_deleted", "log_files_deleted", "pins_expired", "bytes_freed", "complete", "batches"} <= set(
        dry
    )
    assert os.path.exists(os.path.join(table_uri, first_dv))

    human = run("gc", table_uri, "--progress", "always")
    assert human.returncode == 0, human.stderr
    assert "deleted" in human.stdout and "deletion-vector file(s)" in human.stdout
    assert "gc: deletion-vector files" in human.stderr
    assert not os.path.exists(os.path.join(table_uri, first_dv))
    assert ids(t) == list(range(20, 1000))

    again = run("gc", table_uri)
    assert again.returncode == 0 and "nothing to collect" in again.stdout


def test_a_reader_that_goes_away_is_not_an_error(pushed) -> None:
    """`mvtable history t | head -1`: the pipe closes under the CLI. BrokenPipeError is an
    OSError, so it must be handled before the generic storage-error branch (exit 1)."""
    t, _, _ = pushed
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "MVTABLE_FAULT")}
    proc = subprocess.Popen([*CLI, "history", t.uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before the first line
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err and b"error" not in err.lower()


def json_failure(proc: subprocess.CompletedProcess, code: int, kind: str) -> dict:
    """The one JSON object a failing ``--json`` command prints on stdout."""
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    failure = json.loads(proc.stdout)
    assert set(failure) == {"error", "type", "hint", "exit_code"}
    assert (failure["type"], failure["exit_code"]) == (kind, code), failure
    return failure


def test_json_failures_are_one_object_on_stdout(tmp_path):
    missing = str(tmp_path / "nope")
    failure = json_failure(run("history", missing, "--json"), 1, "TableNotFoundError")
    assert missing in failure["error"] and failure["hint"].startswith("check the path")
    human = run("history", missing)
    assert human.stdout == "" and "TableNotFoundError" in human.stderr  # people's output is unchanged

    usage = json_failure(run("history", missing, "--limit", "0", "--json"), 2, "UsageError")
    assert "--limit" in usage["error"] and "usage:" in run("history", missing, "--limit", "0", "--json").stderr


def test_an_interrupt_exits_130(monkeypatch, tmp_path):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.main.__globals__["COMMANDS"], "history", interrupted)
    assert run("history", str(tmp_path)).returncode == cli.EXIT_INTERRUPTED == 130
    failure = json_failure(run("history", str(tmp_path), "--json"), 130, "KeyboardInterrupt")
    assert "run it again" in failure["hint"]


@pytest.mark.parametrize(
    ("uri", "kind", "needle"),
    [
        ("foo://bar", "UnknownProtocolError", "unknown storage protocol 'foo'"),
        ("", "StorageLocationError", "the table path is empty"),
    ],
)
def test_a_location_that_cannot_hold_a_table_is_a_clean_error(uri, kind, needle):
    assert_clean_error(run("history", uri), 1, kind, needle)


def test_a_file_is_not_a_table_directory(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    assert_clean_error(run("inspect", str(a_file)), 1, "StorageLocationError", "is a file, not a table directory")


def test_a_retention_that_starts_with_a_dash_reaches_the_period_parser(table_uri):
    Table.create(table_uri, schema=orders(0, 1).schema)
    for args in (["--retention", "-1d"], ["--retention=-1d"]):
        assert_clean_error(run("vacuum", table_uri, *args), 1, "SettingsError", "retention '-1d' cannot be negative")
    assert_clean_error(run("vacuum", table_uri, "--time-budget", "1", "--retention", "nan"), 1, "not a period")
    assert run_json("vacuum", table_uri, "--retention", "8d", "--dry-run")[0]["retention_s"] == 8 * 86400


def test_a_size_in_bytes_must_be_whole(table_uri):
    Table.create(table_uri, schema=orders(0, 1).schema)
    assert_clean_error(run("compact", table_uri, "--target-size", "1.5"), 1, "SettingsError", "--target-size: '1.5'")


def test_a_path_is_never_read_as_markup(tmp_path):
    uri = str(tmp_path / "[bold]t[/bold]")
    t = Table.create(uri, schema=orders(0, 1).schema)
    assert f"no lineage entries in {uri}" in run("lineage", uri).stdout
    t.overwrite(orders(0, 10), consistent_push=True)
    for command in ("history", "lineage", "inspect"):
        proc = run(command, uri)
        assert proc.returncode == 0, proc.stderr
        assert "[bold]t[/bold]" in proc.stdout, proc.stdout
