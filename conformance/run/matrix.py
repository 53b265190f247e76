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
from dataclasses import dataclass
from pathlib import Path

from conformance.core.vllms import DEFAULT_VLLM, VllmUnderTest, of_label, sort_key
from conformance.results.verdict import CellKey, Verdict
from conformance.run.versions import ensure_overlay
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


Feed = Callable[[], "list[CellKey] | None"]


def _send(process: subprocess.Popen, message: object) -> None:
    """One line of the worker's stdin: a list of cells to run, or {"build": fixtures}."""
    assert process.stdin is not None
    try:
        process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
    except OSError:  # it has died: its exit is read below
        pass


def run_worker(cells: list[CellKey], env: dict[str, str], log, on_verdict,
               cell_timeout: float, on_start=None, python: str | None = None,
               feed: Feed | None = None, build: list[str] | None = None) -> list[CellKey]:
    """Run `cells` in one worker until it finishes or fails; return the cells left to run.

    With `feed`, the worker is kept: each time it has a verdict for every cell it was given,
    `feed()` gives it the next cells (one fixture's), until it returns None. `build`: the
    fixtures it may be given, built before any cell (see `worker.build_all`)."""
    pending = list(cells)
    command = worker_command()
    if python is not None:  # another vLLM release's environment runs the same module
        command = [python, *command[1:]]
    process = subprocess.Popen(command, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert process.stdin is not None
    if feed is not None and build:
        _send(process, {"build": build})
    _send(process, [list(c) for c in cells])
    if feed is None:
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
            if feed is not None and not pending:
                following = feed()
                if following:
                    pending = list(following)
                    _send(process, [list(c) for c in following])
                    deadline = time.monotonic() + cell_timeout
                else:
                    feed = None
                    process.stdin.close()
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
                vllm: VllmUnderTest | None = None, feed: Feed | None = None,
                build: list[str] | None = None) -> None:
    """`cells` in workers on `version` (a fresh one after a crash or a timeout), then, with
    `feed`, whatever it gives them."""
    vllm = vllm or of_label(DEFAULT_VLLM)
    try:
        overlay = ensure_overlay(version, log=lambda m: print(f"  {m}", flush=True),
                                 vllm=vllm.release.version)
        if not vllm.python.exists():
            raise RuntimeError(f"no environment at {vllm.release.venv}: run `python3 "
                               f"scripts/bootstrap.py env --vllm {vllm.release.version}`")
    except Exception as error:  # the version cannot be installed: its cells say so
        while cells:
            for key in cells:
                on_verdict(_failed(key, "error", f"transformers {version} overlay for "
                                                 f"{vllm.describe()}: {error}"))
            cells = (feed and feed()) or []
        return
    env = {**vllm.environ(overlay.environ()), **(extra_env or {})}
    pending = list(cells)
    python = None if vllm.release.version == DEFAULT_VLLM else str(vllm.python)
    with open(log_dir / (log_name or log_file(vllm.label, version)), "a") as log:
        while pending:
            pending = run_worker(pending, env, log, on_verdict, cell_timeout, on_start,
                                 python, feed, build)
            if not pending and feed is not None:  # the worker ended with cells still to give
                pending = feed() or []


def cpu_shares(jobs: int) -> list[tuple[int, ...]]:
    """The CPUs each of `jobs` workers runs on: disjoint shares of this process's CPUs. Two
    workers that share every core slow each other down through torch's thread pools
    (docs/performance.md)."""
    cpus = sorted(os.sched_getaffinity(0))
    if jobs <= 1 or len(cpus) < jobs:
        return [tuple(cpus)] * max(1, jobs)
    size = len(cpus) // jobs
    return [tuple(cpus[i * size:(i + 1) * size]) for i in range(jobs)]


def share_env(cpus: tuple[int, ...]) -> dict[str, str]:
    """A worker's environment for its share: pinned there (`worker.py`) and as many threads.
    Pinned rather than free to use any core: unpinned workers lowered the 2-job speed-up
    (docs/performance.md)."""
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


class FixtureQueue:
    """The cells of one (vLLM, version), one fixture at a time, costliest first: the workers
    that share the version take the next fixture whenever they finish one, so a wrong
    estimate of a fixture's cost (a new fixture, a slower run) costs at most that fixture's
    time at the end, where a split made in advance keeps a worker busy while the other sits
    idle."""

    def __init__(self, cells: list[CellKey], cost: Callable[[str], float]) -> None:
        by_fixture: dict[str, list[CellKey]] = defaultdict(list)
        for key in cells:
            by_fixture[key.fixture].append(key)
        self.fixtures = sorted(by_fixture, key=lambda f: -cost(f))
        self._batches = [by_fixture[f] for f in self.fixtures]
        self._cost = cost
        self._lock = threading.Lock()

    def __call__(self) -> list[CellKey] | None:
        with self._lock:
            return self._batches.pop(0) if self._batches else None

    def remaining(self) -> float:
        """Estimated seconds of the fixtures no worker has taken yet."""
        with self._lock:
            return sum(self._cost(batch[0].fixture) for batch in self._batches)


# A job left free at the end of a run starts one more worker on the version with the most
# work left, when that work is worth a worker's start (its imports, compiled sampler and
# first engine): with one worker per version, the run otherwise ends with the slowest
# version's worker alone.
HELP_MIN_SECONDS = 30.0


@dataclass
class WorkerPlan:
    """What one worker starts with; with `feed`, it then takes fixtures from its version's
    queue until none is left."""

    cells: list[CellKey]
    load: float  # estimated seconds: the costliest plan starts first
    feed: FixtureQueue | None = None


def worker_plans(cells: Iterable[CellKey], jobs: int,
                 costs: dict | None = None) -> list[WorkerPlan]:
    """One worker per (vLLM, version); a version shared by as many workers as it takes to keep
    `jobs` busy, which take its fixtures from one queue (a worker loads each fixture once),
    ordered by `costs` (the committed baseline's seconds)."""
    costs = fixture_costs() if costs is None else costs
    by_version: dict[tuple[str, str], list[CellKey]] = defaultdict(list)
    for key in cells:
        by_version[(key.vllm, key.version)].append(key)
    if not by_version:
        return []
    parts = max(1, -(-max(1, jobs) // len(by_version)))  # ceil(jobs / versions)
    totals = [cost for key, cost in costs.items() if isinstance(key, str)]
    mean = sum(totals) / len(totals) if totals else 1.0
    plans: list[WorkerPlan] = []
    for group in sorted(by_version, key=lambda g: (sort_key(g[0]), parse_version(g[1]))):
        version_cells = by_version[group]

        def cost(fixture: str, version: str = group[1]) -> float:
            # this version's seconds where the baseline has them, else all versions'
            return costs.get((fixture, version), costs.get(fixture, mean))

        fixtures = {c.fixture for c in version_cells}
        load = sum(cost(f) for f in fixtures)
        if len(fixtures) == 1:
            plans.append(WorkerPlan(version_cells, load))
            continue
        # a queue even for one worker: a job freed later may help with it (`helper_plan`)
        shared = FixtureQueue(version_cells, cost)
        for _ in range(min(parts, len(fixtures))):  # each starts on a fixture of its own
            plans.append(WorkerPlan(shared() or [], load / parts, shared))
    return sorted(plans, key=lambda plan: -plan.load)


def helper_plan(plans: list[WorkerPlan], minimum: float = HELP_MIN_SECONDS
                ) -> WorkerPlan | None:
    """A plan for a job left free: the next fixture of the version whose untaken fixtures
    are estimated to take longest (at least `minimum` s), then that version's queue."""
    queues = list({id(p.feed): p.feed for p in plans if p.feed is not None}.values())
    best = max(queues, key=lambda q: q.remaining(), default=None)
    if best is None or best.remaining() < minimum or not (first := best()):
        return None
    return WorkerPlan(first, 0.0, best)


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

    plans = worker_plans(cells, jobs)
    for label, version in sorted({(p.cells[0].vllm, p.cells[0].version) for p in plans},
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
    for plan in plans:
        parts[(plan.cells[0].vllm, plan.cells[0].version)] += 1
    seen: dict[tuple[str, str], int] = defaultdict(int)

    unstarted = [len(plans)]

    def run_plan(plan: WorkerPlan | None) -> None:
        with lock:
            unstarted[0] -= 1
        while plan is not None:
            group = label, version = plan.cells[0].vllm, plan.cells[0].version
            with lock:
                seen[group] += 1
                name = (log_file(label, version) if parts[group] == 1 and seen[group] == 1
                        else log_file(label, version, seen[group]))
            share = shares.get()
            try:
                extra = share_env(share) if jobs > 1 else None
                run_version(version, plan.cells, log_dir, report, cell_timeout, started, extra,
                            name, of_label(label, vllms), plan.feed,
                            plan.feed.fixtures if plan.feed else None)
            finally:
                shares.put(share)
            # this job is free: once no plan waits for one, help the version with most left
            with lock:
                plan = helper_plan(plans) if jobs > 1 and unstarted[0] == 0 else None

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in [pool.submit(run_plan, plan) for plan in plans]:
            future.result()
