"""Table properties and connector settings: one pydantic model each, every value read from
it, every bad value a ``SettingsError`` naming the property."""

from __future__ import annotations

import logging

import pytest

from mvtable.conf import TableProperties, connector_settings, defaults
from mvtable.conf import settings as settings_module
from mvtable.errors import InvalidOptionError, SettingsError
from mvtable.lineage.log import CommitLog


def test_defaults_are_typed() -> None:
    p = TableProperties.from_strings({})
    assert p.checkpoint_interval == 10 and isinstance(p.checkpoint_interval, int)
    assert p.version_retention_s == 7 * 86400
    assert p.replaced_segments_retention_s == p.lineage_entry_retention_s == 86400
    assert p.orphan_grace_s == 3600
    assert p.push_lease_ms == 5 * 60 * 1000
    c = connector_settings()
    assert c.pin_ttl_s == 3600 and c.gc_time_budget_s == 300 and c.dv_cache_bytes == 64 << 20
    assert c.pin_idle_ttl_s == 300


def test_stored_strings_override_defaults() -> None:
    p = TableProperties.from_strings({"versionRetentionPeriod": "12h", "checkpointInterval": "3", "autoCompact": "true"})
    assert (p.version_retention_s, p.checkpoint_interval, p.auto_compact) == (43200, 3, True)


def test_a_writers_overrides_win_over_the_stored_properties() -> None:
    stored = {"rowGroupRows": "100", "autoCompact": "true"}
    p = TableProperties.of(stored, {"rowGroupRows": "7"})
    assert (p.row_group_rows, p.auto_compact) == (7, True)
    assert TableProperties.of(stored).row_group_rows == 100 and stored == {"rowGroupRows": "100", "autoCompact": "true"}
    with pytest.raises(SettingsError, match="rowGroupRows"):
        TableProperties.of(stored, {"rowGroupRows": "0"})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("checkpointInterval", "often"),
        ("checkpointInterval", "0"),
        ("versionRetentionPeriod", "a week"),
        ("orphanGracePeriod", "-1h"),
        ("rowGroupRows", "0"),
        ("compactTargetFileSize", "big"),
        ("compactDeleteRatio", "2"),
        ("autoCompact", "maybe"),
        ("pushLeasePeriod", "5 minutes"),
        ("streamingAppRetentionPeriod", "forever"),
    ],
)
def test_every_bad_value_is_a_settings_error_naming_the_property(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name) as info:
        TableProperties.from_strings({name: value})
    assert isinstance(info.value, InvalidOptionError)  # an invalid-input error, not a crash


def test_unknown_property_is_named_with_the_known_ones() -> None:
    with pytest.raises(SettingsError, match=r"unknown table properties \['checkpointIntervall'\]; known: .*checkpointInterval"):
        TableProperties.from_strings({"checkpointIntervall": "3"})


def test_tolerant_reading_falls_back_per_property() -> None:
    p, problems = TableProperties.tolerant({"checkpointInterval": "often", "rowGroupRows": "7", "fromTheFuture": "1"})
    assert p.checkpoint_interval == 10 and p.row_group_rows == 7  # only the bad one falls back
    assert set(problems) == {"checkpointInterval", "fromTheFuture"}
    assert "often" in problems["checkpointInterval"]


def test_the_log_reads_checkpoint_interval_from_the_model(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    """A table with a property this version does not know still checkpoints at its interval;
    a bad interval falls back to the default with a warning naming it (the commit landed)."""
    from mvtable.lineage.actions import AddSegment, MetadataAction, SegmentFile
    from mvtable.lineage.enums import Operation
    from mvtable.lineage.snapshot import Snapshot
    from mvtable.storage import LocalFileIO

    for props, expected in (({"checkpointInterval": "2", "fromTheFuture": "x"}, [2, 4]), ({"checkpointInterval": "?"}, [])):
        log = CommitLog(LocalFileIO(str(tmp_path / str(len(expected)))), check_files=False)
        log.commit(
            read=Snapshot(),
            operation=Operation.CREATE,
            build=lambda s, p=props: [MetadataAction(table_id="t", table_schema={}, properties=p)],
        )
        with caplog.at_level(logging.WARNING, logger="mvtable.lineage"):
            for i in range(1, 5):
                seg = SegmentFile(id=f"s{i}", path=f"data/s{i}.parquet", num_rows=1, size_bytes=1)
                log.commit(read=log.snapshot(), operation=Operation.APPEND, build=lambda s, seg=seg: [AddSegment(segment=seg)])
        assert log.listing().checkpoints == expected
    assert "checkpointInterval='?' is invalid" in caplog.text
    assert "fromTheFuture" not in caplog.text  # unknown names do not spam every commit


@pytest.mark.parametrize(
    ("name", "value"), [("dvCacheBytes", -1), ("pinTtl", "forever"), ("pinIdleTtl", "later"), ("gcTimeBudget", "soon")]
)
def test_bad_connector_setting_is_named(monkeypatch: pytest.MonkeyPatch, name: str, value: object) -> None:
    bad = {**defaults(), "connector": {**defaults()["connector"], name: value}}
    monkeypatch.setattr(settings_module, "defaults", lambda: bad)
    connector_settings.cache_clear()
    try:
        with pytest.raises(SettingsError, match=name):
            connector_settings()
    finally:
        connector_settings.cache_clear()


def test_table_create_reports_a_bad_property_as_settings_error_once(tmp_path) -> None:
    import pyarrow as pa

    from mvtable.connector import Table

    with pytest.raises(SettingsError) as info:
        Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]), properties={"versionRetentionPeriod": "soon"})
    assert info.value.message.startswith("versionRetentionPeriod: 'soon' is not a period")
    assert str(info.value).count("versionRetentionPeriod") == 1


@pytest.mark.parametrize("period", [float("nan"), float("inf"), -1, "-1d", "9" * 400 + "d"])
def test_a_period_is_finite_and_not_negative(period: object) -> None:
    with pytest.raises(SettingsError, match=r"^\[MVTABLE_SETTINGS\] retention.*(finite|negative)"):
        settings_module.parse_period(period, name="retention")  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [1.5, "1.5", "1.5b", True, None])
def test_a_size_in_bytes_is_whole(size: object) -> None:
    with pytest.raises(SettingsError, match="target: .* is not a size"):
        settings_module.parse_size(size, name="target")  # type: ignore[arg-type]


def test_a_size_with_a_unit_may_have_a_fraction() -> None:
    assert settings_module.parse_size("1.5k") == 1536 and settings_module.parse_size("64MiB") == 64 << 20


def test_python_property_values_become_their_string_form() -> None:
    given = {"rowGroupRows": 100, "autoCompact": True, "compactDeleteRatio": 0.25, "versionRetentionPeriod": 3600}
    strings = settings_module.property_strings(given)
    assert strings == {
        "rowGroupRows": "100",
        "autoCompact": "true",
        "compactDeleteRatio": "0.25",
        "versionRetentionPeriod": "3600s",
    }
    p = TableProperties.from_strings(strings)
    assert (p.row_group_rows, p.auto_compact, p.compact_delete_ratio, p.version_retention_s) == (100, True, 0.25, 3600)


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ([("rowGroupRows", "100")], "properties must be a mapping"),
        ({"rowGroupRows": [100]}, "rowGroupRows: .* is not a property value"),
        ({"compactDeleteRatio": float("nan")}, "compactDeleteRatio: "),
        ({1: "x"}, "property names are strings"),
    ],
)
def test_property_values_of_other_kinds_are_named(properties: object, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        settings_module.property_strings(properties)


def test_settings_read_in_snake_case_and_stored_in_camel_case(tmp_path) -> None:
    import pyarrow as pa

    from mvtable import Table

    # either spelling in; the log keeps the camelCase name every older table already uses
    assert TableProperties.of({"row_group_rows": "5", "versionRetentionPeriod": "1h"}).row_group_rows == 5
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]), properties={"row_group_rows": 9})
    assert t.snapshot().properties == {"rowGroupRows": "9"}
    assert TableProperties.of(t.snapshot().properties).row_group_rows == 9
    with pytest.raises(SettingsError, match="rowGroupRows"):  # errors name the stored spelling
        TableProperties.of({"row_group_rows": "0"})
    with pytest.raises(SettingsError, match="unknown table properties"):
        TableProperties.of({"rowgrouprows": "5"})


def test_the_camel_case_attributes_of_earlier_releases_still_read_with_a_warning() -> None:
    p = TableProperties.of({"rowGroupRows": "11"})
    with pytest.warns(DeprecationWarning, match="use .row_group_rows"):
        assert p.rowGroupRows == 11  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        p.noSuchSetting  # type: ignore[attr-defined]  # noqa: B018
