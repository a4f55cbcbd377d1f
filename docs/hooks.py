"""MkDocs hook: lay out the source folders as the installed ``mvtable`` package.

The folders (``core/``, ``lineage/``, …) become ``mvtable.*`` only through
``[tool.setuptools.package-dir]``. ``.ci/typecheck`` already mirrors that mapping as a
symlink tree for mypy; the API reference reads the same tree (under ``build/docs-src``), so
mkdocstrings documents exactly the modules a user imports.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parent.parent


@event_priority(100)  # before mkdocstrings reads its search paths
def on_config(config: Any) -> Any:
    loader = importlib.machinery.SourceFileLoader("mvtable_typecheck", str(ROOT / ".ci" / "typecheck"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    module.build_tree(ROOT, ROOT / "build" / "docs-src")
    return config
