"""Errors in the command line's words.

The API's messages advise Python callers (``force=True``, ``Table.create(…)``); on the
command line the same advice is a flag, or nothing the CLI could do."""

from __future__ import annotations

import re

# (Python advice in an mvtable message, what the CLI says instead)
_CLI_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Pass force=True if you mean it\."), "Add --force if you mean it."),
    (re.compile(r"\bforce=True\b"), "--force"),
    (re.compile(r"; create (?:one|it) with Table\.create\([^)]*\)(?: or a first write)?"), ""),
    (re.compile(r"\bdry_run=True\b"), "--dry-run"),
    (re.compile(r"\bmin_input_files\b"), "--min-input-files"),
    (re.compile(r"\bdelete_ratio\b"), "--delete-ratio"),
    (re.compile(r"\btarget_file_size\b"), "--target-size"),
    (re.compile(r"\bmax_bytes_per_commit\b"), "--max-bytes-per-commit"),
    (re.compile(r"\btime_budget_s\b"), "--time-budget"),
)


def cli_message(message: str) -> str:
    for pattern, words in _CLI_WORDS:
        message = pattern.sub(words, message)
    return message
