"""Which cells a run holds: fixtures x vLLMs x transformers versions x subjects x checks,
sharded and resumable."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from conformance.checks import get_check
from conformance.results.verdict import CellKey
from conformance.run.vllms import DEFAULT_VLLM, above_window, sort_key
from impl.version import parse_version

# The checkpoint-level checks compare vLLM's backend with native vLLM: one subject
CHECKPOINT_SUBJECT = "vllm-backend"


def model_versions(versions: Sequence[str], vllm: str = DEFAULT_VLLM) -> tuple[str, ...]:
    """Loading models is the slow part: the checks that load them run on that vLLM's window
    plus the first version beyond it (versions below it are `n/a` cells, which cost nothing)."""
    above = sorted((v for v in versions if above_window(vllm, v)), key=parse_version)
    return tuple(v for v in versions if not above_window(vllm, v) or v == above[0])


def expand_cells(fixtures: Iterable[str], versions: Iterable[str], subjects: Iterable[str],
                 checks: Iterable[str], *, all_model_versions: bool = False,
                 vllms: Iterable[str] = (DEFAULT_VLLM,)) -> list[CellKey]:
    versions, fixtures, checks = tuple(versions), tuple(fixtures), tuple(checks)
    cells = []
    for vllm in sorted(vllms, key=sort_key):
        model_on = versions if all_model_versions else model_versions(versions, vllm)
        for version in sorted(versions, key=parse_version):
            for fixture in fixtures:
                for check_id in checks:
                    check = get_check(check_id)
                    if check.level == "checkpoint":
                        if not check.loads_model or version in model_on:
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
