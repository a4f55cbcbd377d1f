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


def test_the_footers_it_reads_are_checked_against_the_log(tmp_path):
    """After a schema change the first export reads the files' footers for their names: a damaged
    footer is a typed error naming the file, never a mapping made of its garbled names (a flipped
    bit in a name still decodes)."""
    import os

    import pyarrow as pa
    import pytest

    from mvtable import Table
    from mvtable.errors import CorruptSegmentError

    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64()), ("name", pa.string())]))
    t.append(pa.table({"id": [1, 2], "name": ["a", "b"]}))
    with t.update_schema() as u:
        u.rename_column("name", "label")
    [seg] = t.snapshot().visible_segments()
    path = os.path.join(t.uri, seg.file.path)
    raw = bytearray(open(path, "rb").read())
    footer_length = int.from_bytes(raw[-8:-4], "little")
    footer_start = len(raw) - 8 - footer_length
    at = raw.index(b"name", footer_start)  # the column's name in the footer: still decodes, as "nbme"
    raw[at + 1] ^= 0x03
    with open(path, "wb") as f:
        f.write(raw)
    with pytest.raises(CorruptSegmentError, match=seg.file.path):
        t.export_iceberg()
