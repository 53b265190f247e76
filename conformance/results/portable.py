"""Paths as results and reports record them: never the absolute folder of the machine (or the
clone) a run was made in.

A run folder's files (results.jsonl, results.json, report.md, report.html, junit.xml) record a
cell's paths (its reproducer, its log) relative to the run folder, so that the folder can be
moved, or downloaded as a CI artifact, and its links still work; the committed baseline records
them relative to the repository root (`conformance baseline`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conformance.paths import ROOT
from conformance.results.verdict import Verdict

# the keys of a cell's data that hold a path
PATH_KEYS = ("reproducer",)


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
    """A cell's data with its reproducer's path relative to the repository where inside it,
    else its file's name alone (a scratch run folder means nothing on another machine)."""
    if not data.get("reproducer"):
        return data
    return {**data, "reproducer": source_name(data["reproducer"], root)}


def portable_cells(verdicts: list[Verdict], root: Path = ROOT) -> list[Verdict]:
    return [dataclasses.replace(v, data=portable_data(v.data, root)) for v in verdicts]


def portable_meta(meta: dict, root: Path = ROOT) -> dict:
    """The meta with every absolute path in it (baseline_of, merged_from, a checkpoint folder)
    made a `source_name`."""
    return _named(meta, lambda path: source_name(path, root))


def _named(value: Any, name: Callable[[str], str]) -> Any:
    """`value` (the meta, or a value in it) with each absolute path in it given by `name`."""
    if isinstance(value, dict):
        return {key: _named(item, name) for key, item in value.items()}
    if isinstance(value, list):
        return [_named(item, name) for item in value]
    if isinstance(value, str) and Path(value).is_absolute():
        return name(value)
    return value


def folder_relative(path: str, folder: Path) -> str:
    """An absolute `path` relative to the run `folder` (climbing out of it with `..` where it
    lies outside: `check --export-repro DIR`, a link that works while both stay where they
    are); a relative path is already relative to the folder and stays as it is."""
    if not Path(path).is_absolute():
        return path
    return Path(os.path.relpath(Path(path).resolve(), Path(folder).resolve())).as_posix()


def folder_cell(verdict: Verdict, folder: Path) -> Verdict:
    """The cell with its paths (data's PATH_KEYS, its log) relative to the run `folder`."""
    data = {key: folder_relative(value, folder)
            if key in PATH_KEYS and isinstance(value, str) and value else value
            for key, value in verdict.data.items()}
    changes: dict = {"data": data}
    if verdict.log:
        changes["log"] = folder_relative(verdict.log, folder)
    return dataclasses.replace(verdict, **changes)


def paths_folder(results: Path, meta: dict, root: Path = ROOT) -> Path:
    """What the cell paths of the results at `results` (a run folder or a results file) are
    relative to: a run's folder, but the repository root for a baseline
    (`conformance baseline`), wherever its file lies."""
    if "baseline_of" in meta:
        return root
    return results if results.is_dir() else results.parent


def folder_absolute(verdict: Verdict, folder: Path) -> Verdict:
    """The inverse of `folder_cell`: the cell's folder-relative paths made absolute again, to
    be written relative to another folder (`merge`: each shard's paths onto the merged one)."""
    def absolute(value: str) -> str:
        return value if Path(value).is_absolute() else str((Path(folder) / value).resolve())

    data = {key: absolute(value) if key in PATH_KEYS and isinstance(value, str) and value
            else value for key, value in verdict.data.items()}
    changes: dict = {"data": data}
    if verdict.log:
        changes["log"] = absolute(verdict.log)
    return dataclasses.replace(verdict, **changes)


def folder_cells(verdicts: list[Verdict], folder: Path) -> list[Verdict]:
    return [folder_cell(v, folder) for v in verdicts]


def folder_meta(meta: dict, folder: Path, root: Path = ROOT) -> dict:
    """The meta with each absolute path relative to the run `folder` where it lies inside it,
    else a `source_name` (a checkpoint folder, the shards merged: where they were on this
    machine is no part of the results)."""
    inside = Path(folder).resolve()

    def name(path: str) -> str:
        found = Path(path).resolve()
        return found.relative_to(inside).as_posix() if found.is_relative_to(inside) else \
            source_name(str(found), root)

    return _named(meta, name)
