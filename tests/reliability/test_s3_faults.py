"""Four writer processes append through an S3 fault-injecting proxy (5xx, resets,
timeouts, slow PUTs, PUTs that land but whose answer is lost, PUTs that land after the
client gave up), with short periodic outages of the log, in front of SeaweedFS; the
schedule is seeded. Afterwards, with the proxy stopped (nothing it held can land later),
the table read straight from the server equals the model built from what each writer was
told:

* every ``landed`` append is there exactly once, at the version and with the transaction
  id the writer was told;
* every ``CommitStateUnknownError`` is resolved by reading the log
  (``CommitLog.find_commit``): its rows are there exactly once if the log holds its
  transaction, and absent otherwise;
* nothing of an append that failed or conflicted is there; no transaction is in the log
  twice.

Duration: ``MVTABLE_S3_FAULT_SECONDS`` (default 14 s, to keep CI short: the outage at 8–11 s
and a few seconds after it; the acceptance run is ``MVTABLE_S3_FAULT_SECONDS=60``)."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from support.s3_fault_proxy import FaultProxy, FaultRule

from mvtable.connector import Table

WRITERS = 4
SECONDS = float(os.environ.get("MVTABLE_S3_FAULT_SECONDS", "14"))
WORKER = str(Path(__file__).with_name("s3_fault_worker.py"))
CLIENT_TIMEOUT_S = 1.0
# Tries per request inside botocore. Its default (5, with s3fs's own retries on top) absorbs
# almost every fault at these rates; two leave enough of them to the commit protocol that
# commits really end up ambiguous (the focused tests run botocore's default).
CLIENT_ATTEMPTS = 2
COMMITS = r"_mvtable/log/\d{20}\.json$"
# (every, for how long) in seconds: long enough to outlast a writer's own read-backs
OUTAGE = (8.0, 3.0)


def fault_rules() -> list[FaultRule]:
    everything = ("error500", "slowdown", "reset", "timeout", "slow", "lost", "lost500", "late")
    return [
        # every few seconds an outage of the log: commit PUTs land but their answers are
        # lost, and the log cannot be read or listed (so a writer cannot read back what it
        # wrote); data files still go through, so that writers get as far as committing
        FaultRule(ops={"PUT"}, key=COMMITS, rate=1.0, kinds=("lost", "lost500", "late"), window=OUTAGE),
        FaultRule(ops={"GET", "LIST"}, key="_mvtable/", rate=1.0, kinds=("error500", "reset"), window=OUTAGE),
        FaultRule(ops={"PUT"}, key=COMMITS, rate=0.3, kinds=everything),
        FaultRule(ops={"PUT"}, rate=0.1, kinds=everything),
        FaultRule(ops={"GET", "LIST"}, rate=0.05, kinds=("error500", "slowdown", "reset", "timeout", "lost500")),
        FaultRule(ops={"DELETE"}, rate=0.05, kinds=("error500", "reset", "lost")),
    ]


@pytest.mark.s3
def test_four_writers_through_s3_faults(tmp_path: Path, s3_fault_proxy: FaultProxy) -> None:
    proxy = s3_fault_proxy
    proxy.hold_s = CLIENT_TIMEOUT_S * 1.5
    proxy.late_s = OUTAGE[1] + 1  # a held commit PUT lands after the outage, when its writer may have given up
    proxy.slow_s = 0.3
    direct = proxy.real.storage_options()
    uri = proxy.real.url("faults")
    Table.create(uri, schema=pa.schema([("id", pa.int64())]), storage_options=direct)

    proxy.set_rules(fault_rules(), seed=27)
    options = proxy.storage_options(timeout_s=CLIENT_TIMEOUT_S, attempts=CLIENT_ATTEMPTS)
    procs = []
    deadline = time.time() + SECONDS  # wall clock: the writers' start-up counts in the run
    for wid in range(WRITERS):
        out = tmp_path / f"writer-{wid}.json"
        args = [sys.executable, WORKER, str(wid), uri, json.dumps(options), str(deadline), str(out)]
        procs.append((out, subprocess.Popen(args)))
    try:
        for _out, p in procs:
            assert p.wait(timeout=SECONDS + 120) == 0, "a writer process failed"
    finally:
        for _out, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    proxy.stop()  # nothing held by the proxy can land after this
    faults = proxy.counts()
    records = [r for out, _ in procs for r in json.loads(out.read_text())]

    t = Table.open(uri, storage_options=direct)
    final = t.to_arrow().column("id").to_pylist()
    counts = collections.Counter(final)
    assert not [i for i, n in counts.items() if n > 1], "duplicated rows"
    log_txns = collections.Counter(t.commit_log.read_commit(v).parameters.get("txn") for v in range(1, t.version + 1))
    assert not [x for x, n in log_txns.items() if n > 1], "a transaction landed twice"

    outcomes = collections.Counter(r["outcome"] for r in records)
    expected: set[int] = set()
    resolved = collections.Counter()
    for r in records:
        present = [i for i in r["ids"] if i in counts]
        if r["outcome"] == "landed":
            assert present == r["ids"], f"a landed append is missing rows: {r}"
            assert t.commit_log.read_commit(r["version"]).parameters["txn"] == r["txn"], f"wrong version reported: {r}"
            expected.update(r["ids"])
        elif r["outcome"] == "unknown":
            assert r["txn"] and r["version"] is not None, r
            found = t.commit_log.find_commit(r["txn"], since=r["version"])
            assert present == (r["ids"] if found is not None else []), f"unknown commit not resolved by the read: {r}"
            resolved["landed" if found is not None else "absent"] += 1
            expected.update(present)
        else:
            assert present == [], f"rows of a {r['outcome']} append are in the table: {r}"
    assert sorted(final) == sorted(expected), "the table differs from the model"

    landed = [r for r in records if r["outcome"] == "landed"]
    assert len(landed) >= WRITERS, f"the run did not get going: {outcomes}"
    assert sum(faults[k] for k in faults if k != "pass") >= 20, f"too few faults injected: {faults}"
    failed = collections.Counter(r["error"].split(":")[0] for r in records if r["outcome"] in ("failed", "conflict"))
    print(
        f"\ns3 faults: {WRITERS} writers x {SECONDS:.0f}s: {dict(outcomes)}; "
        f"{sum(r['attempts'] - 1 for r in landed)} commit retries; unknown resolved {dict(resolved)}; "
        f"failed/conflict {dict(failed)}; faults injected {dict(faults)}; final version {t.version}, {len(final)} rows"
    )
