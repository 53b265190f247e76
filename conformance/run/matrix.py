"""Run cells in worker processes, one (vLLM, transformers version) per worker, each cell isolated.

A worker runs in its vLLM release's environment (`vllms.VllmUnderTest.python`), with the
transformers overlay and, for a vLLM folder, that folder first on PYTHONPATH.

A worker imports torch, transformers and vLLM once and runs its cells in order. When a cell
crashes the worker or runs past its time, that cell gets a `crash` / `timeout` verdict with
the log tail, and a fresh worker continues with the cells after it. A worker that cannot even
start (an import error) gives every cell it held that verdict.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conformance.results.verdict import CellKey, Verdict
from conformance.run.versions import ensure_overlay
from conformance.run.vllms import DEFAULT_VLLM, VllmUnderTest, of_label, sort_key
from conformance.run.worker import MARK, START
from impl.version import parse_version

LOG_TAIL_LINES = 20
STARTUP_S = 300.0  # importing vLLM on a loaded 2-core machine


def worker_command() -> list[str]:
    return [sys.executable, "-m", "conformance.run.worker"]


def _tail(lines: list[str]) -> str:
    return "".join(lines[-LOG_TAIL_LINES:]).strip()


def _stream(process: subprocess.Popen, lines: queue.Queue) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)
    lines.put(None)


def _failed(key: CellKey, status: str, detail: str) -> Verdict:
    return Verdict.of(key, status, detail)


def run_worker(cells: list[CellKey], env: dict[str, str], log, on_verdict,
               cell_timeout: float, on_start=None, python: str | None = None) -> list[CellKey]:
    """Run `cells` in one worker until it finishes or fails; return the cells left to run."""
    pending = list(cells)
    command = worker_command()
    if python is not None:  # another vLLM release's environment runs the same module
        command = [python, *command[1:]]
    process = subprocess.Popen(command, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert process.stdin is not None
    process.stdin.write(json.dumps([list(c) for c in cells]))
    process.stdin.close()
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_stream, args=(process, lines), daemon=True).start()
    recent: list[str] = []
    current: CellKey | None = None
    deadline = time.monotonic() + STARTUP_S + cell_timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            process.kill()
            process.wait()
            victim = current or pending[0]
            on_verdict(_failed(victim, "timeout", f"no verdict within {cell_timeout:.0f} s; "
                                                  f"log tail:\n{_tail(recent)}"))
            pending.remove(victim)
            return pending
        if line is None:
            break
        log.write(line)
        if MARK in line:
            verdict = Verdict.from_json(line[line.index(MARK) + len(MARK):])
            if verdict.key in pending:
                pending.remove(verdict.key)
            on_verdict(verdict)
            current, recent = None, []
        elif START in line:
            current = CellKey(*json.loads(line[line.index(START) + len(START):]))
            deadline = time.monotonic() + cell_timeout
            if on_start:
                on_start(current)
        else:
            recent.append(line)
    code = process.wait()
    if not pending:
        return []
    detail = f"worker exited {code} during this cell; log tail:\n{_tail(recent)}"
    if current is None:  # it never got to a cell: nothing after would fare better
        for key in pending:
            on_verdict(_failed(key, "crash", detail))
        return []
    on_verdict(_failed(current, "crash", detail))
    pending.remove(current)
    return pending


def log_file(vllm: str, version: str, part: int | None = None) -> str:
    """A worker's log: per transformers version, its vLLM named unless it is the default."""
    prefix = "" if vllm == DEFAULT_VLLM else f"vllm-{vllm.replace('@', '-')}-"
    return f"worker-{prefix}transformers-{version}" + (f"-part{part}" if part else "") + ".log"


def run_version(version: str, cells: list[CellKey], log_dir: Path,
                on_verdict: Callable[[Verdict], None], cell_timeout: float = 900.0,
                on_start: Callable[[CellKey], None] | None = None,
                extra_env: dict[str, str] | None = None, log_name: str | None = None,
                vllm: VllmUnderTest | None = None) -> None:
    vllm = vllm or of_label(DEFAULT_VLLM)
    try:
        overlay = ensure_overlay(version, log=lambda m: print(f"  {m}", flush=True),
                                 vllm=vllm.release.version)
        if not vllm.python.exists():
            raise RuntimeError(f"no environment at {vllm.release.venv}: run `python3 "
                               f"scripts/bootstrap.py env --vllm {vllm.release.version}`")
    except Exception as error:  # the version cannot be installed: its cells say so
        for key in cells:
            on_verdict(_failed(key, "error", f"transformers {version} overlay for "
                                             f"{vllm.describe()}: {error}"))
        return
    env = {**vllm.environ(overlay.environ()), **(extra_env or {})}
    pending = list(cells)
    with open(log_dir / (log_name or log_file(vllm.label, version)), "a") as log:
        while pending:
            pending = run_worker(pending, env, log, on_verdict, cell_timeout, on_start,
                                 None if vllm.release.version == DEFAULT_VLLM
                                 else str(vllm.python))


def cpu_shares(jobs: int) -> list[tuple[int, ...]]:
    """The CPUs each of `jobs` workers runs on: disjoint shares of this process's CPUs. Two
    workers that share every core slow each other down through torch's thread pools (measured:
    `--jobs 2` ran slower than `--jobs 1` on 2 cores before the shares)."""
    cpus = sorted(os.sched_getaffinity(0))
    if jobs <= 1 or len(cpus) < jobs:
        return [tuple(cpus)] * max(1, jobs)
    size = len(cpus) // jobs
    return [tuple(cpus[i * size:(i + 1) * size]) for i in range(jobs)]


def share_env(cpus: tuple[int, ...]) -> dict[str, str]:
    """A worker's environment for its share: pinned there (`worker.py`) and as many threads."""
    threads = str(len(cpus))
    return {"CONFORMANCE_CPUS": ",".join(map(str, cpus)), "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads}


def fixture_costs() -> dict[str, float]:
    """Seconds per fixture in the committed baseline, keyed by fixture (all its versions) and
    by (fixture, version): how the runner balances a version's fixtures over workers (a
    fixture's cost differs by version: Legacy cells are cheaper). Missing: every fixture costs
    the same."""
    from conformance.paths import REPORTS_DIR

    try:
        cells = json.loads((REPORTS_DIR / "baseline.json").read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return {}
    costs: dict = defaultdict(float)
    for cell in cells:
        seconds = float(cell.get("seconds") or 0.0)
        costs[cell["fixture"]] += seconds
        costs[(cell["fixture"], cell["version"])] += seconds
    return dict(costs)


def work_units(cells: Iterable[CellKey], jobs: int,
               costs: dict[str, float] | None = None) -> list[list[CellKey]]:
    """The cells split into what one worker runs: one version each, and a version split by
    whole fixtures (a worker loads each fixture once) into as many parts as it takes to keep
    `jobs` workers busy, balanced by `costs`; the costliest unit first."""
    costs = fixture_costs() if costs is None else costs
    by_version: dict[tuple[str, str], list[CellKey]] = defaultdict(list)
    for key in cells:
        by_version[(key.vllm, key.version)].append(key)
    if not by_version:
        return []
    parts = max(1, -(-max(1, jobs) // len(by_version)))  # ceil(jobs / versions)
    totals = [cost for key, cost in costs.items() if isinstance(key, str)]
    mean = sum(totals) / len(totals) if totals else 1.0
    units: list[tuple[float, list[CellKey]]] = []
    for group in sorted(by_version, key=lambda g: (sort_key(g[0]), parse_version(g[1]))):
        version_cells = by_version[group]
        fixtures = list(dict.fromkeys(c.fixture for c in version_cells))

        def cost(fixture: str, version: str = group[1]) -> float:
            # this version's seconds where the baseline has them, else all versions'
            return costs.get((fixture, version), costs.get(fixture, mean))

        loads = [0.0] * min(parts, len(fixtures))
        owner: dict[str, int] = {}
        for fixture in sorted(fixtures, key=lambda f: -cost(f)):  # longest first
            lightest = loads.index(min(loads))
            owner[fixture] = lightest
            loads[lightest] += cost(fixture)
        for part, load in enumerate(loads):
            units.append((load, [c for c in version_cells if owner[c.fixture] == part]))
    return [unit for _, unit in sorted(units, key=lambda u: -u[0])]


def run_cells(cells: Iterable[CellKey], log_dir: Path, on_verdict: Callable[[Verdict], None],
              *, jobs: int = 1, cell_timeout: float = 900.0,
              on_start: Callable[[CellKey], None] | None = None,
              vllms: dict[str, VllmUnderTest] | None = None) -> None:
    """Every cell, in `jobs` workers at a time, each on its own share of the CPUs (one
    (vLLM, version) per worker; split by fixtures when there are fewer of them than jobs).
    `vllms`: what each cell's vLLM label tests (a release's label needs no entry)."""
    lock = threading.Lock()

    def report(verdict: Verdict) -> None:
        with lock:
            on_verdict(verdict)

    def started(key: CellKey) -> None:
        if on_start:
            with lock:
                on_start(key)

    units = work_units(cells, jobs)
    for label, version in sorted({(u[0].vllm, u[0].version) for u in units},
                                 key=lambda g: (sort_key(g[0]), parse_version(g[1]))):
        try:  # installed once, before workers compete for it
            ensure_overlay(version, log=lambda m: print(f"  {m}", flush=True),
                           vllm=of_label(label, vllms).release.version)
        except Exception:
            continue  # run_version gives its cells the error
    shares: queue.Queue = queue.Queue()
    for share in cpu_shares(jobs):
        shares.put(share)
    parts: dict[tuple[str, str], int] = defaultdict(int)
    for unit in units:
        parts[(unit[0].vllm, unit[0].version)] += 1
    seen: dict[tuple[str, str], int] = defaultdict(int)

    def run_unit(unit: list[CellKey]) -> None:
        group = label, version = unit[0].vllm, unit[0].version
        with lock:
            seen[group] += 1
            name = (log_file(label, version) if parts[group] == 1
                    else log_file(label, version, seen[group]))
        share = shares.get()
        try:
            extra = share_env(share) if jobs > 1 else None
            run_version(version, unit, log_dir, report, cell_timeout, started, extra, name,
                        of_label(label, vllms))
        finally:
            shares.put(share)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in [pool.submit(run_unit, unit) for unit in units]:
            future.result()
