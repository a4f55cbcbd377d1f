"""Flipped bits in a segment, a commit and a checkpoint: every read gives the right answer
or a typed error naming the file — never a wrong answer, never an untyped error.

By default each file gets a deterministic sample of flips spread over all of it (seconds);
``MVTABLE_FLIP_SWEEP=full`` flips every bit of every file (minutes), a number flips that
many per file. The figures are printed (``pytest -s``)."""

from __future__ import annotations

import logging
import os

import pytest

from mvtable import Table
from mvtable.lineage.log import checkpoint_path, commit_path

from . import bit_flips

SAMPLE = {"segment": 600, "commit": 300, "checkpoint": 400}


def _count(kind: str) -> int | None:
    sweep = os.environ.get("MVTABLE_FLIP_SWEEP", "")
    if sweep == "full":
        return None
    return int(sweep) if sweep else SAMPLE[kind]


@pytest.fixture(autouse=True)
def _quiet_fallbacks(caplog):
    # a damaged checkpoint is skipped with a warning per read: thousands of them here
    caplog.set_level(logging.ERROR, logger="mvtable.lineage")


def _check(report: bit_flips.Report) -> None:
    print("\n" + "\n".join(report.lines()))
    assert report.flips > 0
    assert report.count("wrong") == 0, report.bad[:5]
    assert report.count("untyped") == 0, report.bad[:5]


def test_flips_in_a_segment(tmp_path):
    t = bit_flips.make_table(str(tmp_path / "t"))
    [seg] = t.snapshot().visible_segments()
    report = bit_flips.run("segment", t.uri, seg.file.path, count=_count("segment"))
    _check(report)
    # the footer is checked against the log and the pages against their CRCs: most flips
    # are caught, whichever read touches them
    assert report.count("typed") > report.flips


def test_flips_in_a_commit(tmp_path):
    t = bit_flips.make_table(str(tmp_path / "t"))
    report = bit_flips.run("commit (the append)", t.uri, commit_path(1), count=_count("commit"))
    _check(report)
    assert report.count("correct") == 0  # every byte of a commit is covered by its checksum


def test_flips_in_a_checkpoint(tmp_path):
    """The table's only record of versions 0..2 is the checkpoint (GC removed the commits),
    so a damaged checkpoint cannot be read around."""
    t = bit_flips.make_table(str(tmp_path / "t"), checkpoint_interval=2)
    assert os.path.exists(os.path.join(t.uri, checkpoint_path(2)))
    for v in range(3):
        os.unlink(os.path.join(t.uri, commit_path(v)))
    assert Table.open(t.uri).scan().count() == bit_flips.ROWS - 4
    report = bit_flips.run("checkpoint", t.uri, checkpoint_path(2), count=_count("checkpoint"))
    _check(report)
    assert report.count("correct") == 0  # the file checksum covers every byte


def test_without_the_checks_the_same_flips_are_served_as_data(tmp_path, monkeypatch):
    """The control: the same segment read with page and footer checks off gives wrong
    answers without an error, so the experiment above can see them."""
    from mvtable.connector import segment_checks

    t = bit_flips.make_table(str(tmp_path / "t"))
    [seg] = t.snapshot().visible_segments()
    monkeypatch.setattr(segment_checks, "VERIFY", False)
    report = bit_flips.run("segment, checks off", t.uri, seg.file.path, count=200)
    print("\n" + "\n".join(report.lines()[:4]))
    assert report.count("wrong") > 0
