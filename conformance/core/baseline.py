"""What the committed baseline (reports/baseline.json) measured, read once: which vLLM
releases on which transformers versions, and on which releases no engine ran. The default
vLLM axis, the findings document's columns and a finding's "shown by" are derived from it,
never typed: a release is measured once its cells are in the baseline."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from conformance.core import catalogue
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


def shown_evidence(cell: dict) -> str:
    """The difference a cell's verdict shows, whole, read from its evidence (results.json's
    `evidence`, results/evidence.py); "" where it has none (a pass, an n/a)."""
    evidence = cell.get("evidence")
    if not evidence:
        return ""
    return evidence.get("whole") or evidence["differences"][evidence.get("shown", 0)]["text"]


def measured(found: tuple[dict, ...] | None = None) -> dict[str, tuple[str, ...]]:
    """vLLM release -> the transformers versions it was measured on, oldest first."""
    return _summary(tuple(cells() if found is None else found))[0]


def engines_not_run(found: tuple[dict, ...] | list[dict] | None = None) -> frozenset[str]:
    """The releases whose engine never ran (every model-level cell `n/a`: a build with no
    engine on the machine that measured it): a finding of model-loading checks alone is not
    measured on them."""
    return _summary(tuple(cells() if found is None else found))[1]


# the last cells summarised, kept by identity: the findings document asks for every finding
# and release, and one pass over the baseline's 8820 cells serves all of them
_LAST: list[tuple[tuple[dict, ...], tuple[dict[str, tuple[str, ...]], frozenset[str]]]] = []


def _summary(found: tuple[dict, ...]) -> tuple[dict[str, tuple[str, ...]], frozenset[str]]:
    if _LAST and _LAST[0][0] is found:
        return _LAST[0][1]
    versions: dict[str, set[str]] = {}
    ran: dict[str, bool] = {}
    # a cell with no `vllm` was recorded before vLLM was an axis: the default's (as a Verdict
    # reads it)
    unlabelled = catalogue.default_release()
    for cell in found:
        vllm = cell.get("vllm", unlabelled)
        versions.setdefault(vllm, set()).add(cell["version"])
        if cell["check"] in ENGINE_CHECKS:
            ran[vllm] = ran.get(vllm, False) or cell["status"] != "n/a"
    summary = ({vllm: tuple(sorted(v, key=parse_version))
                for vllm, v in sorted(versions.items(), key=lambda item: parse_version(item[0]))},
               frozenset(vllm for vllm, any_ran in ran.items() if not any_ran))
    _LAST[:] = [(found, summary)]
    return summary


def newest_engine_release(found: tuple[dict, ...] | None = None) -> str | None:
    """The newest release whose engine the baseline ran (None: none)."""
    ran = [v for v in measured(found) if v not in engines_not_run(found)]
    return ran[-1] if ran else None
