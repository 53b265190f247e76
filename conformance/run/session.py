"""One run of cells: plan -> execute -> judge -> write, the same for every command.

`conformance run` plans the matrix and executes it in workers; `check` plans one checkpoint's
checks and executes them in this process; `bisect` plans one cell per release, in a worker
each. Each cell is judged where it runs (the one judge, `results/judge.py`); the session
records every verdict as it comes (to its folder's results.jsonl, so a killed run resumes) and
writes the results and reports at the end. The commands only parse their arguments.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.core.settings import Settings, use
from conformance.core.vllms import VllmUnderTest, unsupported
from conformance.results import report
from conformance.results.verdict import CellKey, Verdict
from conformance.run.matrix import run_cells

PARTIAL = "results.jsonl"  # every verdict as it comes: what --resume reads


@dataclass
class Session:
    settings: Settings
    folder: Path | None = None  # None: nothing written (bisect)
    listeners: list[Callable[[Verdict], None]] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0  # spent executing

    def open(self, resume: bool = False, owns_folder: bool = True) -> list[Verdict]:
        """Prepare the folder: a new session starts it afresh (every file in it, when the
        folder is the session's own, as a run's is; else only its results.jsonl); with
        `resume` its finished cells are kept and returned."""
        if self.folder is None:
            return []
        self.folder.mkdir(parents=True, exist_ok=True)
        if not resume:
            stale = self.folder.glob("*") if owns_folder else [self.folder / PARTIAL]
            for path in stale:
                if path.is_file():
                    path.unlink()
        self.verdicts = report.read_partial(self.folder / PARTIAL)
        return list(self.verdicts)

    def record(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)
        if self.folder is not None:
            report.append(self.folder / PARTIAL, verdict)
        for listener in self.listeners:
            listener(verdict)

    def in_workers(self, cells: Iterable[CellKey], log_dir: Path, *, jobs: int = 1,
                   cell_timeout: float = 900.0, vllms: dict[str, VllmUnderTest] | None = None,
                   on_start: Callable[[CellKey], None] | None = None) -> None:
        """Each cell in a worker of its (vLLM, transformers version); a version its vLLM
        cannot run is its cells' n/a, said without starting a worker."""
        todo = []
        for key in cells:
            if reason := unsupported(key.vllm, key.version):
                self.record(Verdict.of(key, "n/a", reason))
            else:
                todo.append(key)
        started = time.monotonic()
        run_cells(todo, log_dir, self.record, jobs=jobs, cell_timeout=cell_timeout,
                  on_start=on_start, vllms=vllms, settings=self.settings)
        self.seconds += time.monotonic() - started

    def here(self, execute: Callable[[], list[Verdict]]) -> None:
        """Cells run in this process (`check`): under the session's settings."""
        use(self.settings)
        started = time.monotonic()
        for verdict in execute():
            self.record(verdict)
        self.seconds += time.monotonic() - started

    def write(self, meta: dict[str, Any], cells: Iterable[CellKey] | None = None
              ) -> list[Verdict]:
        """The results and reports of the session's verdicts (of `cells` only, when given: a
        resumed folder may hold others), one per cell; returns them."""
        verdicts = report.latest_per_cell(self.verdicts)
        if cells is not None:
            wanted = set(cells)
            verdicts = [v for v in verdicts if v.key in wanted]
        meta = {"finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "seconds": round(self.seconds, 1), **meta}
        if self.folder is not None:
            report.write_reports(self.folder, verdicts, meta)
        return verdicts
