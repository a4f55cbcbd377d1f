"""The public API documents, in a Google-style ``Raises:`` section, the typed errors a caller handles.

The section is what ``mkdocstrings`` renders in the API reference; a name in it must be a
class of ``mvtable.errors``, so that renaming an error without its documentation fails here.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

import mvtable
from mvtable import errors, storage
from mvtable.connector.cli.output import open_table
from mvtable.connector.pinning import PinnedSnapshot
from mvtable.connector.table import Table, TableScan

# one entry: ``Name: text`` one indent in; deeper lines continue it
_ENTRY = re.compile(r"^    (?P<name>[A-Za-z_][\w.]*): (?P<text>\S.*)$")
_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:$")  # the next Google section (``Returns:``, ``Example:``)


def raises_section(doc: str | None) -> list[tuple[str, str]] | None:
    """The ``(error name, text)`` entries of ``doc``'s ``Raises:`` section; None when it has none.

    Raises:
        AssertionError: the section is there but a line of it is not an entry or its continuation.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    if "Raises:" not in lines:
        return None
    entries: list[tuple[str, str]] = []
    for line in lines[lines.index("Raises:") + 1 :]:
        if not line.strip():
            continue
        if _SECTION.match(line):
            break
        match = _ENTRY.match(line)
        if match:
            entries.append((match["name"], match["text"]))
            continue
        assert line.startswith("        ") and entries, f"not a Raises entry: {line!r}"
    return entries


def _public_methods(cls: type) -> list[tuple[str, object]]:
    """``cls``'s own public methods (class methods too); properties are attributes, not calls."""
    out = []
    for name, member in vars(cls).items():
        if name.startswith("_") or isinstance(member, property):
            continue
        if isinstance(member, (classmethod, staticmethod)):
            member = member.__func__
        if inspect.isfunction(member):
            out.append((f"{cls.__name__}.{name}", member))
    return out


def _front_door_functions() -> list[tuple[str, object]]:
    """The functions of ``mvtable.__all__``.

    Of its classes, ``Table`` is checked by its methods and its own docstring (the constructor);
    the others are values mvtable hands out or takes (results, ``WriteMode``, ``Keys``), built
    without anything a caller would catch."""
    return [(f"mvtable.{name}", obj) for name in mvtable.__all__ if inspect.isfunction(obj := getattr(mvtable, name))]


# callables that raise no mvtable error of their own: their docstring says so instead
RAISES_NOTHING = {
    "mvtable.register": "raises no mvtable error",
    "mvtable.errors.from_spark": "never raises",
    "mvtable.connector.cli.main.main": "raises no mvtable error",  # errors become exit codes
}

DOCUMENTED = [
    (name, obj)
    for name, obj in [
        ("Table", Table),
        *_public_methods(Table),
        *_public_methods(TableScan),
        *_public_methods(PinnedSnapshot),
        *_front_door_functions(),
        ("mvtable.connector.cli.output.open_table", open_table),
        ("mvtable.storage.open_file_io", storage.open_file_io),
        ("mvtable.storage.make_root", storage.make_root),
    ]
    if name not in RAISES_NOTHING
]


def test_the_checked_callables_are_the_public_api():
    names = {name for name, _ in DOCUMENTED}
    expected = {"Table.create", "Table.open", "Table.append", "Table.upsert", "Table.delete", "Table.scan", "Table.vacuum"}
    expected |= {"TableScan.to_reader", "TableScan.to_duckdb", "mvtable.register", "mvtable.read_native", "mvtable.compact"}
    assert expected <= names | set(RAISES_NOTHING)


@pytest.mark.parametrize("name", sorted(RAISES_NOTHING))
def test_a_callable_without_typed_errors_says_so(name: str) -> None:
    module, _, attr = name.rpartition(".")
    obj = getattr(importlib.import_module(module), attr)
    doc = " ".join((obj.__doc__ or "").split())
    assert RAISES_NOTHING[name] in doc, f"{name}: the docstring should say it {RAISES_NOTHING[name]}"
    assert raises_section(obj.__doc__) is None, f"{name}: has a Raises: section now; drop it from RAISES_NOTHING"


@pytest.mark.parametrize(("name", "obj"), DOCUMENTED, ids=[name for name, _ in DOCUMENTED])
def test_public_callable_documents_what_it_raises(name: str, obj: object) -> None:
    entries = raises_section(obj.__doc__)
    assert entries, f"{name}: no Raises: section (or an empty one) in its docstring"
    for error, text in entries:
        cls = getattr(errors, error, None)
        assert isinstance(cls, type) and issubclass(cls, errors.MvTableError), (
            f"{name}: Raises names {error!r}, which is not an error class of mvtable.errors"
        )
        assert text.strip(), f"{name}: Raises entry {error} does not say when"


def test_the_section_reader_rejects_what_is_not_an_entry():
    good = "Summary.\n\n    Raises:\n        VersionNotFoundError: no such\n            version.\n"
    assert raises_section(good) == [("VersionNotFoundError", "no such")]
    assert raises_section("Summary.\n\nRaises ``X`` in prose only.") is None
    with pytest.raises(AssertionError):
        raises_section("Summary.\n\nRaises:\n    a sentence, not an entry")
