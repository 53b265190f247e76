"""The scheduling policy: which cells each worker runs, how many workers at once and on which
CPUs. One (vLLM, transformers version) per worker; a version's fixtures in one queue its
workers share, costliest first (the committed baseline's seconds); a job left free at the end
helps the version with most work left. Starting and talking to a worker is `workers.py`'s.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from conformance.core.settings import Settings
from conformance.core.vllms import VllmUnderTest, of_label, sort_key
from conformance.paths import REPORTS_DIR
from conformance.results.verdict import CellKey, Verdict
from conformance.run.versions import ensure_overlay
from conformance.run.workers import Launch, log_file, run_version
from conformance.subjects.faults import Fault
from impl.version import parse_version


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
              vllms: dict[str, VllmUnderTest] | None = None,
              settings: Settings | None = None, fault: Fault | None = None) -> None:
    """Every cell, in `jobs` workers at a time, each on its own share of the CPUs (one
    (vLLM, version) per worker; split by fixtures when there are fewer of them than jobs).
    `vllms`: what each cell's vLLM label tests (a release's label needs no entry); `fault`:
    planted in each cell it reaches."""
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
                           vllm=of_label(label, vllms).key)
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
                launch = Launch(version, log_dir, settings or Settings(), of_label(label, vllms),
                                cell_timeout, name, share_env(share) if jobs > 1 else {},
                                fault)
                run_version(launch, plan.cells, report, started, plan.feed,
                            plan.feed.fixtures if plan.feed else None)
            finally:
                shares.put(share)
            # this job is free: once no plan waits for one, help the version with most left
            with lock:
                plan = helper_plan(plans) if jobs > 1 and unstarted[0] == 0 else None

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in [pool.submit(run_plan, plan) for plan in plans]:
            future.result()
