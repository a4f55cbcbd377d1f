"""The post-commit pipeline: which commits trigger which step, run by every log the
connector opens, and nothing switched on by importing a module."""

from __future__ import annotations

import ast
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyiceberg.table import StaticTable

from mvtable.connector import Table, post_commit
from mvtable.connector.streaming.sink import commit_batch, plan_batch
from mvtable.connector.writes import write_data
from mvtable.lineage import log as lineage_log
from mvtable.lineage.enums import Operation

from .conftest import orders

CONNECTOR = Path(post_commit.__file__).resolve().parent
ROOT = Path(__file__).resolve().parents[2]
COMPACT = {"rowGroupRows": "50", "compactMinInputFiles": "3", "autoCompact": "true"}


def exported_version(uri: str) -> int | None:
    """The mvtable version the table's Iceberg metadata shows as current (None: no export)."""
    hint = os.path.join(uri, "metadata", "version-hint.text")
    if not os.path.exists(hint):
        return None
    with open(hint) as f:
        metadata = f"file://{uri}/metadata/v{f.read()}.metadata.json"
    return int(StaticTable.from_metadata(metadata).current_snapshot().summary["mvtable.version"])


def operations(t: Table) -> list[str]:
    return [h.operation for h in t.history()]


def run_python(code: str) -> str:
    """``code`` in a fresh interpreter (no module of this test process loaded there)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_python_write_in_a_fresh_interpreter_exports_through_the_pipeline(table_uri):
    Table.create(table_uri, schema=orders(0, 1).schema, properties={"icebergCompat": "true"})
    assert exported_version(table_uri) == 0
    # the write protocol alone (what the Spark writer runs): nothing imported beforehand
    out = run_python(
        f"""
        from mvtable.connector import writes
        from mvtable.connector.post_commit import run
        from tests.connector.conftest import orders

        data = orders(0, 10)
        plan = writes.begin_write({table_uri!r}, storage_options=None, incoming=data.schema, mode="append")
        assert plan.commit_log().after_commit is run
        print(writes.finish_write(plan, writes.write_data(plan, data.to_batches())).commit.version)
        """
    )
    assert int(out) == 1 and exported_version(table_uri) == 1


def test_importing_the_export_module_registers_nothing(table_uri):
    Table.create(table_uri, schema=orders(0, 1).schema, properties={"icebergCompat": "true"})
    assert exported_version(table_uri) == 0
    # a bare lineage log (no after_commit) to an icebergCompat table, the export module
    # imported first: the commit lands and nothing is exported, whatever was imported
    out = run_python(
        f"""
        import mvtable.lineage.log as lineage_log
        before = {{name: repr(value) for name, value in vars(lineage_log).items()}}
        import mvtable.connector.export
        after = {{name: repr(value) for name, value in vars(lineage_log).items()}}
        assert after == before, "importing the export changed the lineage log module"
        from mvtable.lineage import operations as ops
        from mvtable.lineage.enums import Operation
        from mvtable.storage import open_file_io

        log = lineage_log.CommitLog(open_file_io({table_uri!r}, None))
        read = log.snapshot()
        print(log.commit(read=read, operation=Operation.APPEND, build=lambda cur: ops.append(cur, [])).commit.version)
        """
    )
    assert int(out) == 1 and exported_version(table_uri) == 0
    assert not any(callable(v) and "hook" in k for k, v in vars(lineage_log).items())


def test_only_the_pipeline_opens_commit_logs_in_the_connector():
    """Every commit the connector lands runs the pipeline: no connector module builds a
    ``CommitLog`` of its own (``post_commit.open_log`` is the one place)."""
    found = []
    for path in sorted(CONNECTOR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if name == "CommitLog":
                    found.append(f"{path.relative_to(CONNECTOR)}:{node.lineno}")
    assert found == ["post_commit.py:" + str(_line_of("CommitLog(io, after_commit=run)"))]


def _line_of(text: str) -> int:
    lines = (CONNECTOR / "post_commit.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_auto_compaction_follows_data_writes_and_export_follows_every_commit(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={**COMPACT, "icebergCompat": "true"})
    for i in range(3):
        t.append(orders(i * 10, 10))
    # the third append made three small segments: one COMPACT, never followed by another
    assert operations(t)[-2:] == ["APPEND", "COMPACT"]
    assert len(t.snapshot().visible_segment_ids()) == 1
    assert exported_version(table_uri) == t.version  # the compaction's commit was exported too


def test_an_upsert_triggers_auto_compaction(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties=COMPACT, primary_key=["id"])
    t.append(orders(0, 10))
    t.append(orders(10, 10))
    assert operations(t)[-1] == "APPEND"
    t.upsert(orders(15, 10))
    assert operations(t)[-2:] == ["UPSERT", "COMPACT"]
    rows = t.to_arrow().sort_by("id")
    assert rows["id"].to_pylist() == list(range(25))


def test_streaming_micro_batches_trigger_auto_compaction(table_uri):
    Table.create(table_uri, schema=orders(0, 1).schema, properties=COMPACT)
    for batch in range(3):
        data = orders(batch * 10, 10)
        plan = plan_batch(table_uri, storage_options=None, incoming=data.schema, complete=False)
        commit_batch(plan, write_data(plan, data.to_batches()), app_id="app", batch_id=batch)
    t = Table.open(table_uri)
    assert operations(t)[-2:] == ["STREAM_APPEND", "COMPACT"]
    assert t.to_arrow().num_rows == 30


def test_a_failing_step_is_logged_the_next_runs_and_the_commit_stands(table_uri, caplog):
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={**COMPACT, "icebergCompat": "true"})
    # a file where the Iceberg metadata folder should be: every export fails
    for name in os.listdir(os.path.join(table_uri, "metadata")):
        os.remove(os.path.join(table_uri, "metadata", name))
    os.rmdir(os.path.join(table_uri, "metadata"))
    open(os.path.join(table_uri, "metadata"), "w").close()
    with caplog.at_level(logging.WARNING, logger="mvtable.post_commit"):
        results = [t.append(orders(i * 10, 10)) for i in range(3)]
    assert [r.version for r in results] == [1, 2, 3]
    assert operations(t)[-2:] == ["APPEND", "COMPACT"]  # the compaction after the failed export ran
    assert t.to_arrow().num_rows == 30
    failed = [r for r in caplog.records if "post-commit step icebergCompat export failed" in r.getMessage()]
    assert len(failed) == 4  # three appends and the compaction
    assert os.path.getsize(os.path.join(table_uri, "metadata")) == 0


def test_a_failing_compaction_never_fails_the_delete(table_uri, caplog):
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={**COMPACT, "compactDeleteRatio": "0.5"})
    t.append(orders(0, 100))
    (segment,) = t.snapshot().visible_segments()
    t.io.delete([segment.file.path])  # the rewrite cannot read its input
    with caplog.at_level(logging.WARNING, logger="mvtable.post_commit"):
        result = t.delete_rows({segment.file.id: range(60)})  # by address: the file is not read
    assert result.deleted_rows == 60 and operations(t)[-1] == "DELETE"
    assert "post-commit step autoCompact failed" in caplog.text


@pytest.mark.parametrize(
    ("operation", "compacts"),
    [(Operation.APPEND, True), (Operation.DELETE, True), (Operation.UPSERT, True), (Operation.COMPACT, False)],
)
def test_which_commits_trigger_auto_compaction(table_uri, operation, compacts):
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties=COMPACT)
    t.append(orders(0, 10))
    landed = t.commit_log.commit(read=t.snapshot(), operation=operation, build=lambda cur: [])
    names = [s.name for s in post_commit.steps_for(landed)]
    assert names == (["autoCompact"] if compacts else [])
