"""The Iceberg name mapping's merge rule: one id per name at each level, the first that had it."""

from __future__ import annotations

from mvtable.connector.export.name_mapping import merge_names


def test_a_rename_adds_the_new_name_after_the_old_one():
    base = [{"field-id": 1, "names": ["id"]}, {"field-id": 2, "names": ["name"]}]
    later = [{"field-id": 1, "names": ["id"]}, {"field-id": 2, "names": ["label"]}]
    assert merge_names(base, later) == [{"field-id": 1, "names": ["id"]}, {"field-id": 2, "names": ["name", "label"]}]
    assert base[1]["names"] == ["name"]  # a copy


def test_a_name_added_again_under_a_new_id_stays_the_old_ids():
    base = [{"field-id": 3, "names": ["qty"]}]
    later = [{"field-id": 7, "names": ["qty"], "fields": [{"field-id": 8, "names": ["x"]}]}]
    assert merge_names(base, later) == base  # a file without ids holding qty holds field 3


def test_a_rename_onto_a_dropped_columns_name_keeps_that_name_for_the_dropped_column():
    base = [{"field-id": 1, "names": ["a"]}, {"field-id": 2, "names": ["b"]}]
    later = [{"field-id": 1, "names": ["b"]}]  # b dropped, a renamed to b
    assert merge_names(base, later) == base


def test_nested_fields_merge_level_by_level():
    base = [{"field-id": 4, "names": ["info"], "fields": [{"field-id": 6, "names": ["a"]}]}]
    later = [{"field-id": 4, "names": ["info"], "fields": [{"field-id": 6, "names": ["alpha"]}, {"field-id": 9, "names": ["a"]}]}]
    assert merge_names(base, later) == [{"field-id": 4, "names": ["info"], "fields": [{"field-id": 6, "names": ["a", "alpha"]}]}]
