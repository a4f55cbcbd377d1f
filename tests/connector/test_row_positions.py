"""``Table.delete_rows`` takes ``{segment id: integer positions}`` and nothing else: a
float, a bool or a wrong shape is a typed error and nothing is deleted."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.connector.row_positions import row_positions
from mvtable.errors import InvalidOptionError, InvalidRowAddressError


def stable_id(value: object) -> str:
    """A test id that is the same in every process (pytest-xdist's workers must collect the
    same ids): Arrow's repr starts with the object's address."""
    if isinstance(value, (pa.Array, pa.ChunkedArray)):
        return f"{type(value).__name__}({value.to_pylist()!r})"
    return repr(value)


@pytest.mark.parametrize(
    ("positions", "expected"),
    [
        ([0, 3], [0, 3]),
        ((2,), [2]),
        (np.array([1, 4], dtype=np.int32), [1, 4]),
        (np.array([2**63], dtype=np.uint64), [2**63]),
        (pa.array([5], pa.uint8()), [5]),
        (pa.chunked_array([[1], [2]]), [1, 2]),
        ([np.int16(1), 2], [1, 2]),
        ([1, 2**63], [1, 2**63]),  # NumPy makes these floats; they are ints
        ([], []),
        (np.array([], dtype=np.float64), []),
    ],
    ids=stable_id,
)
def test_integer_positions_become_uint64(positions, expected) -> None:
    out = row_positions({"seg": positions})["seg"]
    assert out.dtype == np.uint64 and out.tolist() == expected


@pytest.mark.parametrize(
    ("positions", "error", "message"),
    [
        ([0.5], InvalidOptionError, r"must be integers, not 0\.5"),
        ([1, 0.5], InvalidOptionError, r"not 0\.5"),
        (np.array([1.0]), InvalidOptionError, "float64"),
        ([True], InvalidOptionError, "not True"),
        (pa.array([1.0]), InvalidOptionError, "not double"),
        (pa.array([1, None]), InvalidOptionError, "1 null"),
        ([[1]], InvalidOptionError, "must be flat, not 2-dimensional"),
        (3, InvalidOptionError, "list or array of integers, not int"),
        ("12", InvalidOptionError, "not str"),
        ([-1], InvalidRowAddressError, "negative row position -1"),
        ([-1, 2**63], InvalidRowAddressError, "negative row position -1"),
        ([2**64], InvalidRowAddressError, "past the end"),
    ],
    ids=stable_id,
)
def test_other_positions_are_typed_errors(positions, error, message) -> None:
    with pytest.raises(error, match=message):
        row_positions({"seg": positions})


def test_the_argument_must_be_a_mapping_of_segment_ids() -> None:
    with pytest.raises(InvalidOptionError, match=r"takes a mapping \{segment id: \[row positions\]\}.*not a list"):
        row_positions([("seg", 0)])
    with pytest.raises(InvalidOptionError, match="segment ids are strings"):
        row_positions({1: [0]})


def test_delete_rows_deletes_nothing_on_bad_positions(small_table: Table) -> None:
    seg = small_table.snapshot().visible_segment_ids()[0]
    before = small_table.version
    with pytest.raises(InvalidOptionError, match="0.5"):
        small_table.delete_rows({seg: [0.5]})  # once: truncated to row 0, which was deleted
    with pytest.raises(InvalidOptionError, match="mapping"):
        small_table.delete_rows([(seg, 0)])  # type: ignore[arg-type]
    with pytest.raises(InvalidRowAddressError, match=r"row 9223372036854775808 of segment .* does not exist"):
        small_table.delete_rows({seg: np.array([2**63], dtype=np.uint64)})  # once: "negative row positions"
    assert small_table.version == before and small_table.scan().count() == 2000
    assert small_table.delete_rows({seg: pa.array([0, 1])}).deleted_rows == 2
