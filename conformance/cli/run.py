"""`conformance run`: the main job, with a progress display."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from conformance import expectations
from conformance.checks import check_ids
from conformance.cli.common import DEFAULT_SUBJECTS, RUN_SUBJECTS, csv, fail
from conformance.core import vllms as vllm_axis
from conformance.core.settings import Settings
from conformance.core.vllms import DEFAULT_VLLM
from conformance.paths import REPORTS_DIR
from conformance.results import report
from conformance.results.verdict import BAD, CellKey, Verdict
from conformance.run.environments import ensure_env, parse_many
from conformance.run.plan import expand_cells, shard
from conformance.run.session import Session
from conformance.run.versions import (
    ENV_VERSION,
    requested_versions,
    resolve_up_front,
    runs_column,
)
from conformance.subjects.faults import Fault
from conformance.subjects.kernels import cap, in_child
from fixtures.registry import available_recipes
from fixtures.variants import known_names, variant_names


def cmd_run(args: argparse.Namespace) -> int:
    fixtures = selected_fixtures(args.fixtures, args.variants)
    all_checks = check_ids()
    checks = csv(args.checks) or all_checks
    subjects = csv(args.subjects) or RUN_SUBJECTS
    versions = requested_versions(args.versions)  # a malformed one: a one-line error
    # a one-line error names a bad one
    under_test = parse_many(csv(args.vllm), tuple(args.python))
    for kind, given, known in (("fixture", fixtures, known_names()), ("check", checks, all_checks),
                               ("subject", subjects, DEFAULT_SUBJECTS)):
        if unknown := sorted(set(given) - set(known)):
            return fail(f"unknown {kind}(s) {', '.join(unknown)} (known: {', '.join(known)})")
    try:  # parsed once: every fault names the subject it targets, an unknown one has none
        fault = Fault.parse(args.fault) if args.fault else None
    except ValueError as error:
        return fail(str(error))
    try:  # every worker reads them: a malformed entry is the user's to fix, before any cell
        expectations.load()
    except (ValueError, KeyError, OSError) as error:
        return fail(f"conformance/expectations/findings.toml: {error}")
    # every version installable, or one line each with the resolver's cause: before any folder
    upfront = resolve_up_front(versions, [v.key for v in under_test.values()],
                               csv(args.allow_unmet), log=lambda m: print(m, flush=True))
    if upfront.problems:
        for line in upfront.problems:
            print(f"error: {line}", file=sys.stderr)
        return 2
    run_dir = Path(args.output) if args.output else DEFAULT_OUTPUT
    session = Session(Settings(device=args.device, dtype=args.dtype, profile=args.profile),
                      run_dir, fault=fault)
    # another run's folder, or results a new run would delete: refused before anything slow
    session.claim(resume=args.resume, refuse_earlier=refuses_earlier(args.output, args.fresh))
    if args.jobs is None:
        args.jobs = default_jobs(args.device)
    cells = expand_cells(fixtures, versions, subjects, checks, vllms=under_test)
    # the main job: each vLLM on its paths' newest and the candidate; `rest`: the full matrix's
    # other cells
    cells = [c for c in cells if runs_column(args.versions, c.vllm, c.version, versions)]
    if args.shard:
        index, _, count = args.shard.partition("/")
        cells = shard(cells, int(index), int(count))
    done = session.open(resume=args.resume)
    seed = run_seed(args.seed, args.profile, done)
    session.settings = session.settings.but(seed=seed)  # every worker's suites draw from it
    finished = {v.key for v in done}
    todo = [c for c in cells if c not in finished]
    for label in {c.vllm for c in todo if not vllm_axis.unsupported(c.vllm, c.version)}:
        ensure_env(under_test[label], log=lambda m: print(m, flush=True))
    try:
        kernels = kernel_builds(under_test, args.device)
    except ValueError as error:
        return fail(str(error))
    print(f"{len(cells)} cells ({len(finished & set(cells))} already done): "
          f"{len(fixtures)} fixtures x {len(under_test)} vLLM x {len(versions)} transformers "
          f"versions x {len(subjects)} subjects x {len(checks)} checks; profile {args.profile} "
          f"(seed {seed}); "
          f"{args.jobs} job(s); vLLM under test: "
          + ", ".join(v.describe() for v in under_test.values()), flush=True)
    with Progress(len(cells), len(cells) - len(todo)) as progress:
        session.listeners.append(progress.finished)
        session.in_workers(todo, run_dir, jobs=args.jobs, cell_timeout=args.cell_timeout,
                           vllms=under_test, on_start=progress.started)
    verdicts = session.write({
        "fixtures": list(fixtures), "versions": list(versions), "subjects": list(subjects),
        "checks": list(checks), "profile": args.profile, "seed": seed, "shard": args.shard,
        "device": args.device, "dtype": args.dtype,
        **({"fault": str(fault)} if fault else {}),
        "environment_transformers": ENV_VERSION,
        "vllm": list(under_test),
        # a folder is named by its label; where it was is no part of the results (portable)
        "vllm_sources": {k: v.source.name for k, v in under_test.items() if v.source},
        "impl_reference": vllm_axis.impl_follows(under_test),
        **({"kernels": kernels} if kernels else {}),
        **upfront.meta(),  # the requirements a version ran without (--allow-unmet)
    }, cells)
    session.close()
    report.print_table(verdicts)
    print(f"reports: {run_dir}/ (results.json, report.md, report.html, junit.xml)")
    return 1 if any(v.status in BAD for v in verdicts) else 0


DEFAULT_OUTPUT = REPORTS_DIR / "runs" / "latest"


def kernel_builds(under_test: dict, device: str) -> dict[str, str]:
    """Each vLLM's CPU kernel build on this machine (vLLM picks it by the CPU), said once up
    front and kept in the results: asked in a child process of the vLLM's own environment,
    so a build this CPU cannot run is its model cells' reason, never a dead process."""
    if device != "cpu":
        return {}
    cap()  # a value it cannot take: the run's one-line error, before any worker
    found = {}
    for label, vllm in under_test.items():
        if vllm.python.exists():
            found[label] = in_child(vllm.python, vllm.environ(dict(os.environ))).describe()
            print(f"vLLM {label}: {found[label]}", flush=True)
    return found


def selected_fixtures(given: str | None, variants: bool) -> tuple[str, ...]:
    """`--fixtures` (default: every fixture), and with `--variants` every config variant of
    those (`llava~full`, fixtures/variants/) after them; a variant is named like a fixture."""
    fixtures = csv(given) or available_recipes()
    return tuple(dict.fromkeys((*fixtures, *variant_names(fixtures)))) if variants else fixtures


def refuses_earlier(output: str | None, fresh: bool) -> bool:
    """Whether a new run refuses a folder that holds an earlier run's results: one given with
    --output, unless --fresh. The default folder holds the latest run, which the next one
    replaces: the main job's command is rerun as it is."""
    return (not fresh and output is not None
            and Path(output).resolve() != DEFAULT_OUTPUT.resolve())


def run_seed(requested: int | None, profile: str, done: list[Verdict]) -> int:
    """The seed of a run's suites: `--seed`, else the one the cells of the run it resumes drew
    from (a resumed run stays one run), else the profile's (fixed for dev and ci, new for
    nightly)."""
    # lazy: the suites import hypothesis: +85 ms on every command's start (`conformance --help`)
    from conformance.run.suite import default_seed

    resumed = {v.data["seed"] for v in done if "seed" in v.data}
    if len(resumed) > 1 or (requested is not None and resumed - {requested}):
        raise ValueError(f"the run folder's cells drew from seed {', '.join(map(str, resumed))}:"
                         " resume with that --seed, or start a new run without --resume")
    if requested is not None:
        return requested
    return resumed.pop() if resumed else default_seed(profile)


MAX_DEFAULT_JOBS = 4  # each worker holds its engines and models: memory, not CPUs, bounds more


def default_jobs(device: str) -> int:
    """One worker per CPU on the CPU (each pinned to its own core: docs/performance.md), one
    on a GPU (workers would share the one device and its memory)."""
    if device != "cpu":
        return 1
    return max(1, min(MAX_DEFAULT_JOBS, len(os.sched_getaffinity(0))))


class Progress:
    """Cells done, running and failed, with an estimate of the time left: a rich progress bar
    on a TTY, which prints the bad cells' lines above it; else (a CI log) one plain line per
    cell, never wrapped, with its number of the total and the time left."""

    def __init__(self, total: int, done: int, terminal: bool | None = None):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        self.console = Console(stderr=False)
        self.terminal = self.console.is_terminal if terminal is None else terminal
        self.bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                MofNCompleteColumn(), TimeRemainingColumn(), console=self.console,
                                transient=False, disable=not self.terminal)
        self.task = self.bar.add_task("", total=total, completed=done)
        self.total, self.done, self.ran = total, done, 0
        self.running: set[CellKey] = set()
        self.failed = 0
        self.started_at = time.monotonic()

    def __enter__(self) -> Progress:
        self.started_at = time.monotonic()
        self.bar.__enter__()
        self._describe()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.__exit__(*exc)

    def _describe(self) -> None:
        running = ", ".join(f"{k.fixture}/{k.check}@{k.version}"
                            + ("" if k.vllm == DEFAULT_VLLM else f"/vLLM {k.vllm}")
                            for k in sorted(self.running))
        self.bar.update(self.task, description=f"failed {self.failed} | running {running or '-'}")

    def started(self, key: CellKey) -> None:
        self.running.add(key)
        self._describe()

    def finished(self, verdict: Verdict) -> None:
        self.running.discard(verdict.key)
        self.failed += verdict.status in BAD
        self.done += 1
        self.ran += verdict.status != "n/a"  # an n/a cell starts no worker: no measure of pace
        self.bar.advance(self.task)
        self._describe()
        line = f"{verdict.status:>7}  {verdict.key.label()} ({verdict.seconds:.1f} s)"
        if not self.terminal:
            print(f"[{self.done}/{self.total}] {line}{self.left()}", flush=True)
        elif verdict.status in BAD:
            self.bar.console.print(f"  {line}", highlight=False, markup=False)

    def left(self) -> str:
        """The time left at this run's pace so far: its seconds per cell that ran."""
        if not self.ran or self.done >= self.total:
            return ""
        per_cell = (time.monotonic() - self.started_at) / self.ran
        return f"; about {duration(per_cell * (self.total - self.done))} left"


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"
