"""Which cells a run holds: fixtures x vLLMs x transformers versions x subjects x checks,
sharded and resumable; and what each cell is given to run (`Cell`: the work description the
cell runner, `run/cell.py`, takes, in a worker or in this process).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from conformance.checks import check_ids, get_check
from conformance.core.subjects import VLLM_BACKEND
from conformance.core.vllms import DEFAULT_VLLM, current_label, sort_key
from conformance.results.verdict import CellKey
from conformance.run.versions import installed_transformers
from conformance.subjects.faults import Fault
from fixtures.recipe import Recipe
from impl.version import parse_version

# The checkpoint-level checks compare vLLM's backend with native vLLM: one subject
CHECKPOINT_SUBJECT = VLLM_BACKEND


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint a contributor brings (`conformance check`), in place of the cell's
    fixture: its folder and the recipe made for it."""

    path: str
    recipe: Recipe


@dataclass(frozen=True)
class Cell:
    """One cell's work: its key (handed down to whatever judges it, never rebuilt from the
    process that runs it), the fault planted in it (already routed to its subject and
    version: `Fault.routed`), and for `check` the checkpoint it runs on."""

    key: CellKey
    fault: Fault | None = None
    checkpoint: Checkpoint | None = None  # None: the key's fixture

    @classmethod
    def of(cls, key: CellKey, fault: Fault | None) -> Cell:
        """The cell `key` of a run that plants `fault`: planted only where it reaches."""
        return cls(key, fault.routed(key.subject, key.version) if fault else None)

    def to_json(self) -> dict[str, Any]:
        """What a worker is sent (a checkpoint's cells run in the process that has it)."""
        if self.checkpoint is not None:
            raise ValueError(f"{self.key.label()}: a checkpoint's cell runs in its process")
        return {"key": list(self.key),
                **({"fault": self.fault.to_json()} if self.fault else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cell:
        fault = data.get("fault")
        return cls(CellKey(*data["key"]), Fault.from_json(fault) if fault else None)


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


def key_here(fixture: str, subject: str, check: str) -> CellKey:
    """The cell of `fixture`, `subject` and `check` on the versions this process runs: a
    cell run by hand (tests, scripts/explore_suites.py) names its key so."""
    return CellKey(fixture, installed_transformers(), subject, check, current_label())


def checkpoint_cells(checkpoint: Checkpoint, checks: Iterable[str], subjects: Iterable[str],
                     version: str, vllm: str) -> list[Cell]:
    """`check`'s cells on a checkpoint, on the versions its process runs: every check of
    `checks` in the registry's order, a checkpoint-level one once, a suite per subject."""
    wanted = set(checks)
    keys = expand_cells((checkpoint.recipe.name,), (version,), subjects,
                        [c for c in check_ids() if c in wanted], vllms=(vllm,))
    return [Cell(key, checkpoint=checkpoint) for key in keys]


def shard(cells: list[CellKey], index: int, count: int) -> list[CellKey]:
    """Shard `index` (1-based) of `count`: whole (vLLM, version, fixture) groups, round robin,
    so a shard loads each fixture on each version once."""
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count}: the index must be within 1..{count}")
    groups = sorted({(c.vllm, c.version, c.fixture) for c in cells},
                    key=lambda g: (sort_key(g[0]), parse_version(g[1]), g[2]))
    mine = {g for i, g in enumerate(groups) if i % count == index - 1}
    return [c for c in cells if (c.vllm, c.version, c.fixture) in mine]
