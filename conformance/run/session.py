"""One run of cells: plan -> execute -> judge -> write, the same for every command.

`conformance run` plans the matrix and executes it in workers; `check` plans one checkpoint's
checks and executes them in this process; `bisect` plans one cell per release, in a worker
each. Every cell goes through the one cell runner (`run/cell.py`), in a worker or here, and is
judged where it runs (the one judge, `results/judge.py`); the session records every verdict as
it comes (to its folder's results.jsonl, so a killed run resumes) and writes the results and
reports at the end. The commands only parse their arguments.

A folder is one session's at a time: the session holds its lock (`FolderLock`) from `open` to
`close` or its process's end, and a second session into it refuses, naming the first one's
process. A folder that holds an earlier session's results is kept (`resume`), started over, or,
for a command whose folder is no scratch one (`refuse_earlier`: `run --output DIR`), refused.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import fcntl
import os
import shutil
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
from conformance.subjects.faults import Fault

PARTIAL = "results.jsonl"  # every verdict as it comes: what --resume reads
RESULTS = "results.json"
LOCK = ".lock"  # the process id of the session that holds the folder
# what a session writes below its folder beside its files: cleared when it starts over
SUBFOLDERS = ("logs", "repro")


class FolderLock:
    """A folder's lock: an advisory lock (flock) on its LOCK file, which names the holding
    process. The kernel drops it when its process ends, however it ends, so the lock of a run
    that was killed is free and the next session takes it over. One per folder per process
    (`held`): a process that opens a folder twice (tests, `check` called in-process) holds
    it once."""

    held: dict[Path, FolderLock] = {}

    def __init__(self, folder: Path, fd: int) -> None:
        self.folder, self.fd = folder, fd

    @classmethod
    def take(cls, folder: Path) -> FolderLock:
        folder = folder.resolve()
        if folder in cls.held:
            return cls.held[folder]
        path = folder / LOCK
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise RuntimeError(f"{folder} is in use by another run (process {holder}): "
                                   "wait for it to end, or give another --output") from None
            try:  # the file a releasing session removed is no lock: take the new one
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        cls.held[folder] = lock = cls(folder, fd)
        atexit.register(lock.release)  # a command that never closes its session (`check`)
        return lock

    def release(self) -> None:
        if self.held.get(self.folder) is not self:  # released already
            return
        del self.held[self.folder]
        with contextlib.suppress(FileNotFoundError):  # its folder removed meanwhile
            os.unlink(self.folder / LOCK)  # removed while held: no one takes a removed file
        os.close(self.fd)


def earlier_results(folder: Path) -> int:
    """How many cells an earlier session recorded in `folder` (0: none it could read)."""
    for name in (PARTIAL, RESULTS):
        try:
            if count := len(report.read_results(folder / name)[0]):
                return count
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return 0


@dataclass
class Session:
    settings: Settings
    folder: Path | None = None  # None: nothing written (bisect)
    fault: Fault | None = None  # planted in each cell it reaches (`run --fault`, `bisect`)
    listeners: list[Callable[[Verdict], None]] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0  # spent executing
    lock: FolderLock | None = None

    def claim(self, resume: bool = False, refuse_earlier: bool = False) -> None:
        """Take the folder, changing nothing in it: a RuntimeError (one line) while another
        session holds it; with `refuse_earlier` and without `resume`, a ValueError (one line)
        when it holds an earlier session's results. A command claims its folder before its
        slow checks, and opens it once they passed."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock = FolderLock.take(self.folder)
        if refuse_earlier and not resume and (count := earlier_results(self.folder)):
            self.close()
            raise ValueError(
                f"{self.folder} holds the results of an earlier run ({count} cell(s)): "
                "--resume to finish it, --fresh to start it over, or another --output")

    def open(self, resume: bool = False, owns_folder: bool = True,
             refuse_earlier: bool = False) -> list[Verdict]:
        """Claim the folder (`claim`) and prepare it: a new session starts it afresh (every
        file in it, when the folder is the session's own, as a run's is, else only its
        results.jsonl; and its logs/ and repro/); with `resume` its finished cells are kept
        and returned."""
        if self.folder is None:
            return []
        self.claim(resume, refuse_earlier)
        if not resume:
            stale = self.folder.glob("*") if owns_folder else [self.folder / PARTIAL]
            for path in stale:
                if path.is_file() and path.name != LOCK:
                    path.unlink()
            for name in SUBFOLDERS if owns_folder else SUBFOLDERS[:1]:
                shutil.rmtree(self.folder / name, ignore_errors=True)
        self.verdicts = report.read_partial(self.folder / PARTIAL)
        return list(self.verdicts)

    def close(self) -> None:
        """Let the folder go (a process's end does too)."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

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
                  on_start=on_start, vllms=vllms, settings=self.settings, fault=self.fault)
        self.seconds += time.monotonic() - started

    def here(self, execute: Callable[[], list[Verdict]]) -> None:
        """Cells run in this process (`check`: `cell.run_here`), under the session's
        settings."""
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
