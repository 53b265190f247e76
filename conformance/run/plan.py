"""Which cells a run holds: fixtures x vLLMs x transformers versions x subjects x checks,
sharded and resumable."""

from __future__ import annotations

from collections.abc import Iterable

from conformance.checks import get_check
from conformance.core.subjects import VLLM_BACKEND
from conformance.core.vllms import DEFAULT_VLLM, sort_key
from conformance.results.verdict import CellKey
from impl.version import parse_version

# The checkpoint-level checks compare vLLM's backend with native vLLM: one subject
CHECKPOINT_SUBJECT = VLLM_BACKEND


def expand_cells(fixtures: Iterable[str], versions: Iterable[str], subjects: Iterable[str],
                 checks: Iterable[str], *,
                 vllms: Iterable[str] = (DEFAULT_VLLM,)) -> list[CellKey]:
    """Every cell, the model-level ones on every version too: an upgrade candidate far beyond
    the window is where the model checks matter most (a cell that cannot run says why)."""
    versions, fixtures, checks = tuple(versions), tuple(fixtures), tuple(checks)
    cells = []
    for vllm in sorted(vllms, key=sort_key):
        for version in sorted(versions, key=parse_version):
            for fixture in fixtures:
                for check_id in checks:
                    if get_check(check_id).level == "checkpoint":
                        cells.append(CellKey(fixture, version, CHECKPOINT_SUBJECT, check_id,
                                             vllm))
                        continue
                    cells.extend(CellKey(fixture, version, s, check_id, vllm) for s in subjects)
    return cells


def shard(cells: list[CellKey], index: int, count: int) -> list[CellKey]:
    """Shard `index` (1-based) of `count`: whole (vLLM, version, fixture) groups, round robin,
    so a shard loads each fixture on each version once."""
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count}: the index must be within 1..{count}")
    groups = sorted({(c.vllm, c.version, c.fixture) for c in cells},
                    key=lambda g: (sort_key(g[0]), parse_version(g[1]), g[2]))
    mine = {g for i, g in enumerate(groups) if i % count == index - 1}
    return [c for c in cells if (c.vllm, c.version, c.fixture) in mine]
