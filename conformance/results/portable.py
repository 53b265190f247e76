"""Paths as a committed report may record them: relative to the repository root, never the
absolute folder of the machine (or the clone) a run was made in."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from conformance.paths import ROOT
from conformance.results.verdict import Verdict


def repo_relative(path: str, root: Path = ROOT) -> str:
    """`path` relative to `root` where it lies inside it; any other path unchanged."""
    if not Path(path).is_absolute():
        return path
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return path


def source_name(path: str, root: Path = ROOT) -> str:
    """Where results came from: relative to the repository if inside it, else the folder's
    name alone (a scratch folder's full path means nothing on another machine)."""
    relative = repo_relative(path, root)
    return Path(relative).name if Path(relative).is_absolute() else relative


def portable_data(data: dict, root: Path = ROOT) -> dict:
    """A cell's data with its reproducer's path relative to the repository (where inside it)."""
    if not data.get("reproducer"):
        return data
    return {**data, "reproducer": repo_relative(data["reproducer"], root)}


def portable_cells(verdicts: list[Verdict], root: Path = ROOT) -> list[Verdict]:
    return [dataclasses.replace(v, data=portable_data(v.data, root)) for v in verdicts]


def portable_meta(meta: dict, root: Path = ROOT) -> dict:
    """The meta with every absolute path in it (baseline_of, merged_from, a checkpoint folder)
    made a `source_name`."""
    return {key: _portable_value(value, root) for key, value in meta.items()}


def _portable_value(value: object, root: Path) -> object:
    if isinstance(value, dict):
        return portable_meta(value, root)
    if isinstance(value, list):
        return [_portable_value(item, root) for item in value]
    if isinstance(value, str) and Path(value).is_absolute():
        return source_name(value, root)
    return value
