"""Spark's ``.option("replaceWhere", "<SQL predicate>")`` as a pyarrow expression over the table's columns.

A small reader of the predicates a ``replaceWhere`` holds in practice, not a SQL parser:
a conjunction (``AND``) of ``column op literal`` (``=``, ``==``, ``<>``, ``!=``, ``<``,
``<=``, ``>``, ``>=``), ``column [NOT] IN (literal, …)``, ``column BETWEEN a AND b`` and
``column IS [NOT] NULL``, in parentheses or not. Columns are names as the table spells
them (any case, as Spark resolves them) or in backticks. Literals are numbers, quoted text
(``'2024-01-05'``, ``''`` for a quote), ``DATE '…'``, ``TIMESTAMP '…'``, ``TRUE``/``FALSE``;
each is converted to its column's type, as Spark casts a string compared with a date.
Anything else (``OR``, functions, arithmetic, comparisons of two columns) is an
``InvalidOptionError`` that says what was not understood and what is.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mvtable.errors import InvalidOptionError

__all__ = ["parse_replace_where"]

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>'(?:[^']|'')*')
    | (?P<quoted>`(?:[^`]|``)+`)
    | (?P<num>[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
    | (?P<op><=|>=|<>|!=|==|=|<|>)
    | (?P<punct>[(),])
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)
_OPS = {"=": "==", "==": "==", "<>": "!=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_READS = (
    "it reads a conjunction (AND) of column = literal (also <>, <, <=, >, >=), column [NOT] IN (…), "
    "column BETWEEN a AND b and column IS [NOT] NULL"
)


class _Tokens:
    def __init__(self, text: str) -> None:
        self.text = text
        self.items: list[tuple[str, str]] = []
        at = 0
        while at < len(text):
            if text[at:].strip() == "":
                break
            m = _TOKEN.match(text, at)
            if m is None or m.end() == at:
                raise self.error(f"cannot read {text[at:].strip()[:30]!r}")
            kind = m.lastgroup or ""
            self.items.append((kind, m.group(kind)))
            at = m.end()
        self.i = 0

    def error(self, problem: str) -> InvalidOptionError:
        return InvalidOptionError(f"replaceWhere {self.text!r}: {problem}; {_READS}")

    def peek(self) -> tuple[str, str] | None:
        return self.items[self.i] if self.i < len(self.items) else None

    def next(self, what: str) -> tuple[str, str]:
        item = self.peek()
        if item is None:
            raise self.error(f"it ends where {what} was expected")
        self.i += 1
        return item

    def keyword(self, *words: str) -> bool:
        item = self.peek()
        if item is not None and item[0] == "word" and item[1].upper() in words:
            self.i += 1
            return True
        return False

    def expect(self, kind: str, value: str) -> None:
        item = self.next(repr(value))
        if item[0] != kind or item[1].upper() != value.upper():
            raise self.error(f"{item[1]!r} where {value!r} was expected")


def parse_replace_where(text: str, schema: pa.Schema) -> pc.Expression:
    """The pyarrow expression ``text`` means over a table of ``schema``.

    Raises:
        InvalidOptionError: ``text`` is empty, names a column the table does not have, holds a
            literal its column's type cannot take, or a form this reader does not read."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidOptionError(f"replaceWhere needs a predicate such as \"day = '2024-01-05'\", not {text!r}")
    tokens = _Tokens(text)
    terms = [_term(tokens, schema)]
    while tokens.keyword("AND"):
        terms.append(_term(tokens, schema))
    rest = tokens.peek()
    if rest is not None:
        if rest[0] == "word" and rest[1].upper() == "OR":
            raise tokens.error("OR is not read (a scoped push replaces one conjunction)")
        raise tokens.error(f"{rest[1]!r} after a complete condition")
    out = terms[0]
    for t in terms[1:]:
        out = out & t
    return out


def _term(tokens: _Tokens, schema: pa.Schema) -> pc.Expression:
    item = tokens.peek()
    if item == ("punct", "("):
        tokens.next("(")
        inner = [_term(tokens, schema)]
        while tokens.keyword("AND"):
            inner.append(_term(tokens, schema))
        tokens.expect("punct", ")")
        out = inner[0]
        for t in inner[1:]:
            out = out & t
        return out
    column = _column(tokens, schema)
    field = pc.field(column)
    t = schema.field(column).type
    if tokens.keyword("IS"):
        negated = tokens.keyword("NOT")
        tokens.expect("word", "NULL")
        return field.is_valid() if negated else field.is_null()
    negated = tokens.keyword("NOT")
    if tokens.keyword("IN"):
        tokens.expect("punct", "(")
        values = [_literal(tokens, t, column)]
        while tokens.peek() == ("punct", ","):
            tokens.next(",")
            values.append(_literal(tokens, t, column))
        tokens.expect("punct", ")")
        matched = field.isin(pa.array(values, type=t))
        return (~matched & field.is_valid()) if negated else matched  # SQL: NULL NOT IN (…) is not true
    if tokens.keyword("BETWEEN"):
        low = _literal(tokens, t, column)
        tokens.expect("word", "AND")
        high = _literal(tokens, t, column)
        inside = (field >= pa.scalar(low, type=t)) & (field <= pa.scalar(high, type=t))
        return ~inside if negated else inside
    if negated:
        raise tokens.error(f"NOT after {column} must be followed by IN or BETWEEN")
    kind, op = tokens.next("a comparison")
    if kind != "op":
        raise tokens.error(f"{op!r} after column {column} where a comparison (=, <, IN, BETWEEN, IS NULL …) was expected")
    value = pa.scalar(_literal(tokens, t, column), type=t)
    return {
        "==": field == value,
        "!=": field != value,
        "<": field < value,
        "<=": field <= value,
        ">": field > value,
        ">=": field >= value,
    }[_OPS[op]]


def _column(tokens: _Tokens, schema: pa.Schema) -> str:
    kind, text = tokens.next("a column")
    if kind == "quoted":
        name = text[1:-1].replace("``", "`")
    elif kind == "word":
        name = text
    else:
        raise tokens.error(f"{text!r} where a column was expected (the column comes first: day = '2024-01-05')")
    if name in schema.names:
        return name
    folded = [n for n in schema.names if n.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    if tokens.peek() == ("punct", "("):
        raise tokens.error(f"{name}(…) is a function call, which is not read")
    raise tokens.error(f"the table has no column {name!r} (its columns are {schema.names})")


def _literal(tokens: _Tokens, t: pa.DataType, column: str) -> Any:
    kind, text = tokens.next("a literal")
    typed = None
    if kind == "word" and text.upper() in ("DATE", "TIMESTAMP") and (tokens.peek() or ("", ""))[0] == "str":
        typed = text.upper()
        kind, text = tokens.next("a quoted literal")
    if kind == "word" and text.upper() in ("TRUE", "FALSE"):
        raw: Any = text.upper() == "TRUE"
    elif kind == "str":
        raw = text[1:-1].replace("''", "'")
    elif kind == "num":
        raw = text
    elif kind == "word" and text.upper() == "NULL":
        raise tokens.error(f"{column} compared with NULL matches no row: write {column} IS NULL")
    else:
        raise tokens.error(f"{text!r} where a literal was expected (a comparison of two columns or a function is not read)")
    try:
        return _convert(raw, t, typed)
    except (ValueError, TypeError, InvalidOperation, OverflowError) as exc:
        raise tokens.error(f"{text!r} is not a value of column {column} ({t}): {exc}") from None


def _convert(raw: Any, t: pa.DataType, typed: str | None) -> Any:
    if pa.types.is_boolean(t):
        if isinstance(raw, bool):
            return raw
        raise ValueError("a boolean column compares with TRUE or FALSE")
    if isinstance(raw, bool):
        raise ValueError("TRUE/FALSE compare with a boolean column")
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return (
            dt.date.fromisoformat(str(raw).strip()[:10]) if typed != "TIMESTAMP" else dt.datetime.fromisoformat(str(raw)).date()
        )
    if pa.types.is_timestamp(t):
        stamp = dt.datetime.fromisoformat(str(raw).strip())
        if t.tz is not None and stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.timezone.utc)
        return stamp
    if pa.types.is_integer(t):
        value = Decimal(str(raw))
        if value != value.to_integral_value():
            raise ValueError("not an integer")
        return int(value)
    if pa.types.is_floating(t):
        return float(raw)
    if pa.types.is_decimal(t):
        return Decimal(str(raw))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return str(raw)
    raise TypeError(f"replaceWhere does not compare columns of type {t}")
