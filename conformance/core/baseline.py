"""What the committed baseline (reports/baseline.json) measured, read once: which vLLM
releases on which transformers versions, and on which releases no engine ran. The default
vLLM axis, the findings document's columns and a finding's "shown by" are derived from it,
never typed: a release is measured once its cells are in the baseline."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from conformance.paths import ROOT
from impl.version import parse_version

BASELINE = ROOT / "reports" / "baseline.json"
ENGINE_CHECKS = ("model", "encoder", "mrope", "generate", "pooling")
"""The checks that load a model (`Check.loads_model`; a test keeps the two equal): data here,
since the baseline's readers sit below the checks."""


@functools.cache
def cells(path: Path = BASELINE) -> tuple[dict, ...]:
    try:
        return tuple(json.loads(path.read_text())["cells"])
    except (OSError, ValueError, KeyError):
        return ()


def measured(found: tuple[dict, ...] | None = None) -> dict[str, tuple[str, ...]]:
    """vLLM release -> the transformers versions it was measured on, oldest first."""
    versions: dict[str, set[str]] = {}
    for cell in cells() if found is None else found:
        versions.setdefault(cell.get("vllm", "0.31.0"), set()).add(cell["version"])
    return {vllm: tuple(sorted(v, key=parse_version))
            for vllm, v in sorted(versions.items(), key=lambda item: parse_version(item[0]))}


def engines_not_run(found: tuple[dict, ...] | list[dict] | None = None) -> frozenset[str]:
    """The releases whose engine never ran (every model-level cell `n/a`: a build with no
    engine on the machine that measured it): a finding of model-loading checks alone is not
    measured on them."""
    ran: dict[str, bool] = {}
    for cell in cells() if found is None else found:
        if cell["check"] in ENGINE_CHECKS:
            vllm = cell.get("vllm", "0.31.0")
            ran[vllm] = ran.get(vllm, False) or cell["status"] != "n/a"
    return frozenset(vllm for vllm, any_ran in ran.items() if not any_ran)


def newest_engine_release(found: tuple[dict, ...] | None = None) -> str | None:
    """The newest release whose engine the baseline ran (None: none)."""
    ran = [v for v in measured(found) if v not in engines_not_run(found)]
    return ran[-1] if ran else None
