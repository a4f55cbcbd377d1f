"""The project as a user gets it: a wheel built from a snapshot of the repository and
installed with ``pip install --no-deps --target`` into a folder of its own.

Tests put that folder first on a driver's PYTHONPATH to check what only a plain install
shows: the wheel ships every module, and Spark finds ``format("mvtable")`` through the
top-level ``pyspark_mvtable`` module with no ``register()`` call (an editable install
serves modules through a meta-path finder, which Spark's module scan cannot list)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

_SNAPSHOT_IGNORE = shutil.ignore_patterns(
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.pyc",
    ".pytest_cache",
    ".hypothesis",
    ".benchmarks",
    ".venv",
    "tests",
    "benchmarks",
    "spark-warehouse",
    "metastore_db",
    "derby.log",
)


def build_wheel(dist_dir: os.PathLike[str] | str, project_dir: os.PathLike[str] | str = REPO_ROOT) -> Path:
    """``python -m pip wheel --no-deps -w dist_dir <project>``; returns the wheel.

    The build runs on a snapshot copy of the project: an in-tree setuptools build leaves
    ``build/`` behind in the repository, and ``build/lib`` keeps modules that were since
    deleted, which later wheels would silently ship."""
    dist = Path(dist_dir)
    dist.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mvtable-wheel-build-") as tmp:
        snapshot = Path(tmp) / "src"
        shutil.copytree(project_dir, snapshot, ignore=_SNAPSHOT_IGNORE, symlinks=True)
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", TMPDIR=tmp)
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(snapshot)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"pip wheel failed:\n{proc.stdout}\n{proc.stderr}")
    wheels = sorted(dist.glob("mvtable-*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise RuntimeError(f"pip wheel produced no mvtable wheel in {dist}:\n{proc.stdout}")
    return wheels[-1]


def install_wheel_into(target_dir: os.PathLike[str] | str) -> Path:
    """Build the project wheel and ``pip install --no-deps --target target_dir`` it.
    Returns ``target_dir``; prepend it to PYTHONPATH to get a plain (non-editable) install
    whose top-level ``pyspark_mvtable`` module ``pkgutil.iter_modules`` can see."""
    target = Path(target_dir)
    wheel = build_wheel(target.parent / f"{target.name}-dist")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "-q", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"),
    )
    if proc.returncode != 0:
        raise RuntimeError(f"pip install --target failed:\n{proc.stdout}\n{proc.stderr}")
    return target
