"""``mvtable.checks``: one check per kind of value, each returning the canonical type or an
``InvalidOptionError`` that names the argument."""

from __future__ import annotations

import numpy as np
import pytest

from mvtable import checks
from mvtable.errors import InvalidOptionError, SettingsError


def test_flag_takes_only_real_bools() -> None:
    assert checks.flag(True, name="dry_run") is True
    for bad in ("no", "yes", 0, 1, None):
        with pytest.raises(InvalidOptionError, match=r"dry_run must be True or False"):
            checks.flag(bad, name="dry_run")


def test_count_takes_numpy_integers_and_refuses_floats_and_bools() -> None:
    assert checks.count(np.int64(3), name="n") == 3 and type(checks.count(np.int64(3), name="n")) is int
    assert checks.count(0, name="n", minimum=0) == 0
    for bad in (1.5, 2.0, True, "2", -1, 0):
        with pytest.raises(InvalidOptionError, match=r"n must be an integer >= 1"):
            checks.count(bad, name="n")


def test_version_takes_numpy_integers_only() -> None:
    assert checks.version(np.int64(1)) == 1 and checks.version(np.uint8(0)) == 0
    for bad in (True, np.bool_(True), 1.0, np.float64(1), -1, "1"):
        with pytest.raises(InvalidOptionError, match="version must be a version number"):
            checks.version(bad)


def test_seconds_must_be_a_finite_non_negative_number() -> None:
    assert checks.seconds(5, name="t") == 5.0 and checks.seconds(np.float32(0.5), name="t") == 0.5
    for bad, message in (
        ("5", "number of seconds"),
        (True, "number of seconds"),
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        (-1, "negative"),
    ):
        with pytest.raises(InvalidOptionError, match=message):
            checks.seconds(bad, name="t")
    with pytest.raises(SettingsError):
        checks.seconds(float("nan"), name="t", error=SettingsError)


def test_column_names_refuse_a_bare_string() -> None:
    assert checks.column_names(None) is None
    assert checks.column_names(("id", "price")) == ["id", "price"]
    with pytest.raises(InvalidOptionError, match="columns must be a list of names"):
        checks.column_names("id")
    with pytest.raises(InvalidOptionError, match="columns must be a list of names"):
        checks.column_names(["id", 3])  # type: ignore[list-item]
