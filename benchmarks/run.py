"""Benchmarks of the harness, each a ratio measured in one run; writes reports/bench.json.

    .venv/bin/python benchmarks/run.py [--only NAME,...] [--from-run DIR]

- overhead: for one fixture and the same generated cases, the time of the processing checks
  divided by the time of the raw HF processor calls those checks make (target <= 1.2);
- column: one default version column with 1 and 2 workers, in the order 1, 2, 2, 1 (the mean
  of each pair) after an untimed run: wall time (target <= 4 min with the default jobs),
  speed-up (reported), verdicts equal in every cell;
- jobs: the same on two default version columns, as the main job runs them (one worker per
  version): the speed-up of 2 jobs (target >= 1.7x);
- jobs-matrix (on request): the same on the full default matrix, the main job itself, in the
  order 2, 1, 2;
- matrix (on request): the full default matrix through the main job, or `--from-run DIR`
  (target <= 20 min);
- matrix-rest (on request): the full matrix's columns the main job leaves out (transformers
  5.12.1, vLLM 0.31.0 on 5.20.2), measured apart, or `--from-run DIR`;
- tests (on request): the README's test command, warm (target <= 5 min);
- switch: switching transformers versions (a fresh overlay) against building a new
  environment with that version (target: ratio <= 0.1 and <= 20 s);
- vllm-approach: cached-vs-uncached comparisons done as vLLM's test_common.py does them
  (a baseline and a cached processor per comparison) against this harness's cache check;
- cold-start: the model cold start per tiny fixture (benchmarks/cold_start.py, target <= 5 s);
- mutation: one-line mutants planted into a private copy of vLLM's Transformers backend, each
  run through the matrix on the fixtures that exercise it; the share a comparison catches
  (benchmarks/mutation.py, target >= 0.9). Not part of the default set: it reruns the matrix
  once per mutant.

The figures and what they showed: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def timed_processor_calls():
    """Patch the HF processors' and tokenizers' entry points to add up the time spent inside
    them (outermost calls only)."""
    from transformers.processing_utils import ProcessorMixin
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    spent = [0.0, 0]
    originals = {}
    for base, names in ((ProcessorMixin, ("__call__",)),
                        (PreTrainedTokenizerBase, ("__call__", "encode", "decode"))):
        for cls in {base, *_subclasses(base)}:
            for name in names:
                if name in cls.__dict__:
                    originals[(cls, name)] = cls.__dict__[name]

    def wrap(original):
        def call(self, *args, **kwargs):
            if getattr(_depth, "n", 0):
                return original(self, *args, **kwargs)
            _depth.n = 1
            started = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - started
                spent[1] += 1
                _depth.n = 0
        return call

    for (cls, name), original in originals.items():
        setattr(cls, name, wrap(original))
    return spent


class _Depth:
    n = 0


_depth = _Depth()


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def generate_cases(recipe, count: int) -> list:
    """`count` cases from the suites' strategy, the same on every run."""
    from hypothesis import given, settings

    from conformance.inputs.strategies import cases

    generated = []

    @settings(max_examples=count, database=None, derandomize=True)
    @given(cases(recipe))
    def collect(case):
        generated.append(case)

    collect()
    return generated[:count]


def bench_overhead(fixture: str = "qwen2_5_vl", examples: int = 20, rounds: int = 5) -> dict:
    """impl's processing checks over the same cases: total time / time in HF processor calls.

    The first pass over the cases pays one-time costs (signature reading, lazy imports, the
    tokenizer's caches) that a worker pays once for thousands of cases; it is reported apart
    (`ratio_first_pass`). The ratio is that of `rounds` further passes, all timed together,
    each with the memoised outputs cleared."""
    import transformers  # noqa: F401  (import before patching)

    from conformance.checks import get_check
    from conformance.subjects.context import make_context

    ctx = make_context(fixture, "impl")
    _ = ctx.subject.processor
    generated = generate_cases(ctx.recipe, examples)
    checks = [get_check(c) for c in ("prompt-ids", "placeholders", "slicing")]
    ctx.oracles = {}  # the subject's own processing only: what the HF calls are for
    spent = timed_processor_calls()

    def one_pass() -> float:
        ctx._memo.clear()  # every pass processes every case anew, as the first one did
        started = time.perf_counter()
        for case in generated:
            for check in checks:
                if check.id == "slicing":
                    check.run(ctx, case)
                else:
                    ctx.subject.process(case)
        return time.perf_counter() - started

    first = one_pass()
    first_hf, calls = spent[0], spent[1]
    spent[0] = spent[1] = 0
    total = sum(one_pass() for _ in range(rounds))
    return {"fixture": fixture, "cases": len(generated), "rounds": rounds,
            "seconds_total": round(total, 3), "seconds_in_hf_processor": round(spent[0], 3),
            "hf_calls": spent[1], "ratio": round(total / spent[0], 3),
            "ratio_first_pass": round(first / first_hf, 3), "first_pass_hf_calls": calls,
            "target": 1.2}


def steal_seconds() -> float | None:
    """CPU time the hypervisor gave other guests, all CPUs added up (Linux's /proc/stat):
    on a shared virtual machine two runs of the same work differ by what was stolen."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _run_matrix(args: list[str], folder: str,
                env: dict[str, str] | None = None) -> tuple[float, list[dict]]:
    """`conformance run ARGS` into `folder` (`env`: added to this process's): its wall seconds
    and cells."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "conformance", "run", *args, "--output", folder],
                   capture_output=True, cwd=ROOT, env={**os.environ, **(env or {})})
    seconds = time.perf_counter() - started
    return seconds, json.loads((Path(folder) / "results.json").read_text())["cells"]


def _statuses(cells: list[dict]) -> dict[tuple, str]:
    return {(c["fixture"], c["version"], c["subject"], c["check"]): c["status"] for c in cells}


def _alternating_runs(order: tuple, args_of: Callable[[Any], list[str]],
                      env_of: Callable[[Any], dict[str, str] | None] = lambda mode: None
                      ) -> tuple[dict[Any, dict], bool]:
    """`conformance run` once per mode in `order` (`args_of(mode)`, `env_of(mode)`): per mode its
    runs' wall seconds and their mean, the cells' own seconds added up (equal in every mode
    unless the modes slow the cells down; the rest of the wall time is workers' starts,
    fixtures' set-up, waits), the CPU time the hypervisor stole during each, and the number of
    cells; and whether every run gave the same verdict in every cell."""
    runs: dict[Any, dict] = {}
    verdicts = []
    for mode in order:
        before = steal_seconds()
        with tempfile.TemporaryDirectory() as folder:
            took, cells = _run_matrix(args_of(mode), folder, env_of(mode))
        after = steal_seconds()
        verdicts.append(_statuses(cells))
        run = runs.setdefault(mode, {"runs_seconds": [], "cell_seconds": [],
                                     "steal_seconds": []})
        run["runs_seconds"].append(round(took, 1))
        run["cell_seconds"].append(round(sum(float(c.get("seconds") or 0) for c in cells), 1))
        run["steal_seconds"].append(None if before is None or after is None
                                    else round(after - before, 1))
        run["cells"] = len(cells)
        run["seconds"] = round(_mean(run["runs_seconds"]), 1)
    return runs, all(v == verdicts[0] for v in verdicts)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _jobs_speedup(args: list[str], out: dict, order: tuple[int, ...] = (1, 2, 2, 1),
                  warm: list[str] | None = None) -> dict:
    """`conformance run ARGS` with 1 worker and with 2, in a symmetric `order` (1, 2, 2, 1
    or 2, 1, 2), each figure the mean of its runs: a shared machine's speed drifts over
    minutes, and one run of each, one after the other, puts all of that drift into the ratio;
    a symmetric order cancels a drift that is steady over the benchmark."""
    with tempfile.TemporaryDirectory() as folder:
        # untimed: every cache warm first (vLLM's on-disk model-info cache, rewritten whenever
        # another vLLM copy ran, would slow the first engine of each worker)
        out["warm_run_seconds"] = round(_run_matrix([*(warm or args), "--jobs", "2"],
                                                    folder)[0], 1)
    runs, out["same_verdicts"] = _alternating_runs(order, lambda jobs: [*args, "--jobs",
                                                                        str(jobs)])
    out |= {f"jobs_{jobs}": run for jobs, run in runs.items()}
    out["speedup"] = round(out["jobs_1"]["seconds"] / out["jobs_2"]["seconds"], 2)
    return out


def bench_column(version: str = "5.17.0") -> dict:
    """One default version column (every fixture and check), with 1 worker and with 2 (each
    on its own core, taking the version's fixtures from one queue): the column's wall time,
    the speed-up, and that every run gave the same verdict in every cell. Target: <= 4 min.

    Within one version, each of the two workers pays the fixed start of a worker (imports,
    the compiled sampler, its first engine) that one worker pays once, so a column's speed-up
    stays below the main job's (`bench_jobs`)."""
    return _jobs_speedup(["--versions", version], {"version": version, "target_minutes": 4})


def bench_jobs(versions: str = "5.15.1,5.17.0") -> dict:
    """The main job's speed-up from a second worker (target: 2 jobs >= 1.7x 1 job), on two
    default version columns: the main job runs one worker per version, two versions side by
    side with 2 jobs, one after the other with 1, so each worker's fixed start is paid side
    by side as well. Two columns rather than all six keep the four runs short; two
    columns of unequal work end with one worker alone for their difference (too short for a
    helper's start to pay off), which the six columns of the main job share out
    (`bench_jobs_matrix`)."""
    return _jobs_speedup(["--versions", versions],
                         {"versions": versions, "target_speedup": 1.7})


def bench_jobs_matrix() -> dict:
    """The speed-up of 2 jobs on the main job itself: the full default matrix, in the order
    2, 1, 2 (on request: it takes three full runs). The warm-up run loads every fixture's
    models on every version (`--checks model`): overlays, fixtures and vLLM's model-info
    cache ready, for a tenth of a full run."""
    return _jobs_speedup([], {"versions": "default", "target_speedup": 1.7}, order=(2, 1, 2),
                         warm=["--checks", "model"])


def bench_heap(versions: str = "5.15.1,5.17.0",
               order: tuple[bool, ...] = (False, True, True, False)) -> dict:
    """The workers' frozen heap (`conformance/core/heap.py`) against the collector scanning
    every live object (`CONFORMANCE_HEAP_FREEZE=0`), shaped like the main job: two version
    columns of the default vLLM (every fixture and check; its engines are where vLLM
    collects), 2 jobs, so that each worker runs a whole column and keeps every fixture's
    engines, as the main job's workers do (a column split between two workers keeps half the
    heap each). In `order` (frozen or not; caches already warm: run the main job first): the
    wall seconds, the cells' own seconds added up (the figure the freeze moves), and that every
    run gave the same verdict in every cell."""
    args = ["--versions", versions, "--vllm", "0.31.0", "--jobs", "2"]
    runs, same = _alternating_runs(
        order, lambda frozen: args,
        lambda frozen: {"CONFORMANCE_HEAP_FREEZE": "1" if frozen else "0"})
    frozen, unfrozen = runs[True], runs[False]
    return {"versions": versions, "order": ["frozen" if f else "unfrozen" for f in order],
            "frozen": frozen, "unfrozen": unfrozen,
            "ratio_wall": round(_mean(frozen["runs_seconds"])
                                / _mean(unfrozen["runs_seconds"]), 3),
            "ratio_cell_seconds": round(_mean(frozen["cell_seconds"])
                                        / _mean(unfrozen["cell_seconds"]), 3),
            "same_verdicts": same}


def matrix_rest() -> list[str]:
    """`conformance run` arguments for the full matrix's cells the main job leaves out
    (`--versions rest`, read off the one decision, conformance.run.versions.default_column)."""
    from conformance.run.versions import REST

    return ["--versions", REST]


def bench_matrix(from_run: str | None = None, args: tuple[str, ...] = (),
                 what: str = "default matrix") -> dict:
    """The full default matrix through the main job (default jobs), or a finished run of it
    (`--from-run DIR`, e.g. the README's main-job command on a fresh clone): wall minutes."""
    if from_run:
        results = json.loads((Path(from_run) / "results.json").read_text())
        seconds, cells = results["meta"]["seconds"], results["cells"]
        source = "a finished `conformance run` (its meta.seconds)"
    else:
        with tempfile.TemporaryDirectory() as folder:
            seconds, cells = _run_matrix(list(args), folder)
        source = f"{' '.join(['conformance run', *args])} ({what}, default jobs)"
    counts: dict[str, int] = {}
    for cell in cells:
        counts[cell["status"]] = counts.get(cell["status"], 0) + 1
    return {"cells": len(cells), "minutes": round(seconds / 60, 1), "statuses": counts,
            "cell_seconds": round(sum(c.get("seconds") or 0 for c in cells)),
            **cost_by(cells), "source": source, "target_minutes": 20}


def cost_by(cells: list[dict]) -> dict[str, dict[str, float]]:
    """Where a run's time goes: its cells' seconds summed per fixture, per check and per
    (vLLM, transformers) column, costliest first. A cell's seconds are its own (a model cell's
    include loading its engines; a worker's start is no cell's)."""
    found: dict[str, dict[str, float]] = {}
    for name, of in (("fixture", lambda c: c["fixture"]), ("check", lambda c: c["check"]),
                     ("column", lambda c: f"{c.get('vllm', '0.31.0')} / {c['version']}")):
        sums: dict[str, float] = {}
        for cell in cells:
            sums[of(cell)] = sums.get(of(cell), 0.0) + (cell.get("seconds") or 0.0)
        found[f"cell_seconds_by_{name}"] = {
            key: round(value, 1) for key, value in sorted(sums.items(), key=lambda kv: -kv[1])}
    return found


def bench_matrix_rest(from_run: str | None = None) -> dict:
    """What the main job leaves out of the full matrix (`matrix_rest`), measured apart: the
    nightly's `--versions full` costs the main job plus about this."""
    found = bench_matrix(from_run, tuple(matrix_rest()), "the full matrix's columns the main "
                         "job leaves out")
    found.pop("target_minutes")
    return found


TIER_LINE = re.compile(r"^\[bootstrap\] (.+ tier): [^:]*: exit (\d+) after (\d+) s$")


def bench_tests() -> dict:
    """The README's test command, timed (environment already built: the warm figure; a fresh
    clone on a fresh machine is the other, recorded by hand from `.ci/run`)."""
    started = time.perf_counter()
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "bootstrap.py"), "test"],
                         capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 1), "minutes": round(seconds / 60, 1),
            "exit_code": run.returncode, **tier_times(run.stdout), "target_minutes": 5}


def tier_times(output: str) -> dict:
    """Each tier's seconds and the pytest summaries, from the test command's output."""
    tiers = {m.group(1): int(m.group(3)) for line in output.splitlines()
             if (m := TIER_LINE.match(line))}
    summary = [ln for ln in output.splitlines() if " passed" in ln or "exit codes" in ln]
    return {"tiers_seconds": tiers, "summary": summary[-4:]}


def bench_switch(version: str = "5.14.1") -> dict:
    """A fresh overlay for `version` against a new environment holding it; once with uv's
    cache warm (both link from it), once cold (both download what they need)."""
    out: dict = {"version": version, "target_ratio": 0.1, "target_seconds": 20}
    for cache in ("warm", "cold"):
        with tempfile.TemporaryDirectory() as folder:
            env = dict(os.environ, UV_NATIVE_TLS="1")
            if cache == "cold":
                env["UV_CACHE_DIR"] = f"{folder}/uv-cache"
            switch = _time_overlay(version, env)
            build = _time_new_environment(version, env, Path(folder))
        out[cache] = {"switch_seconds": round(switch, 2), "new_environment_seconds":
                      round(build, 1), "ratio": round(switch / build, 4)}
    return out


def _time_overlay(version: str, env: dict) -> float:
    from conformance.run import versions

    shutil.rmtree(versions.overlay_dir(version), ignore_errors=True)
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        started = time.perf_counter()
        versions.ensure_overlay(version, log=lambda message: None)
        return time.perf_counter() - started
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _time_new_environment(version: str, env: dict, folder: Path) -> float:
    from conformance.run import versions

    lock = ROOT / "env" / "requirements-cpu.lock"
    pins = versions.resolve_pins(version)
    names = {p.split("==")[0] for p in pins}
    lines = [ln for ln in lock.read_text().splitlines() if ln.split("==")[0].strip() not in names]
    pinned = folder / "lock.txt"
    pinned.write_text("\n".join([*lines, *pins]) + "\n")
    uv = str(Path(sys.prefix) / "bin" / "uv")
    started = time.perf_counter()
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(folder / "venv")],
                   check=True, env=env)
    subprocess.run([uv, "pip", "install", "-q", "--python", str(folder / "venv/bin/python"),
                    "--no-deps", "-r", str(pinned)], check=True, env=env)
    return time.perf_counter() - started


def bench_vllm_approach(fixture: str = "llava", comparisons: int = 8) -> dict:
    """test_common.py's way (a fresh baseline and cached processor per comparison over random
    batches) against this harness (processors built once, cases shared) for the same number of
    cached-vs-uncached comparisons."""
    from conformance.checks.differences import output_difference
    from conformance.subjects.context import make_context
    from conformance.subjects.vllm import VllmSubject

    ctx = make_context(fixture, "vllm-backend")
    generated = generate_cases(ctx.recipe, comparisons)
    started = time.perf_counter()
    for case in generated:  # vLLM's way: new processors for each comparison
        fresh = VllmSubject("vllm-backend", "transformers", ctx.path, ctx.recipe)
        baseline = fresh.process(case)
        cached = VllmSubject("vllm-backend", "transformers", ctx.path, ctx.recipe)
        assert output_difference(baseline, cached.process(case, cache=cached.new_cache())) is None
    theirs = time.perf_counter() - started
    subject = ctx.subject
    _ = subject.processor
    started = time.perf_counter()
    for case in generated:  # ours: one processor, one cache
        cache = subject.new_cache()
        assert output_difference(subject.process(case), subject.process(case, cache=cache)) is None
    ours = time.perf_counter() - started
    return {"fixture": fixture, "comparisons": len(generated),
            "vllm_test_common_seconds": round(theirs, 2), "harness_seconds": round(ours, 2),
            "speedup": round(theirs / ours, 1)}


def bench_cold_start() -> dict:
    """benchmarks/cold_start.py in its own process (a fresh import state), for every fixture."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "cold_start.json"
        run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cold_start.py"),
                              "--json", str(out)], capture_output=True, text=True, cwd=ROOT)
        if not out.exists():
            return {"error": (run.stderr or run.stdout).strip()[-500:]}
        return json.loads(out.read_text())


def bench_mutation() -> dict:
    """benchmarks/mutation.py: every mutant, against an unmutated run of the same cells."""
    from benchmarks.mutation import bench_mutation as run

    return run()


BENCHES = {
    "overhead": bench_overhead,
    "column": bench_column,
    "jobs": bench_jobs,
    "jobs-matrix": bench_jobs_matrix,
    "matrix": bench_matrix,
    "matrix-rest": bench_matrix_rest,
    "heap": bench_heap,
    "tests": bench_tests,
    "switch": bench_switch,
    "vllm-approach": bench_vllm_approach,
    "cold-start": bench_cold_start,
    "mutation": bench_mutation,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated benchmarks (default: all but mutation)")
    parser.add_argument("--output", default=str(ROOT / "reports" / "bench.json"))
    parser.add_argument("--from-run", help="matrix, matrix-rest: take a finished run folder of it")
    args = parser.parse_args()
    # the full matrix and the test command take minutes each: on request only
    default = [b for b in BENCHES
               if b not in ("matrix", "matrix-rest", "jobs-matrix", "heap", "tests", "mutation")]
    chosen = [b for b in (args.only.split(",") if args.only else default) if b]
    if unknown := [b for b in chosen if b not in BENCHES]:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)} (known: {', '.join(BENCHES)})")
    path = Path(args.output)
    results = json.loads(path.read_text()) if path.exists() else {}
    for name in chosen:
        started = time.perf_counter()
        before = results.get(name) or {}
        results[name] = (BENCHES[name](args.from_run) if name.startswith("matrix")
                         else BENCHES[name]())
        results[name]["measured"] = time.strftime("%Y-%m-%d")
        if before.get("source"):  # the history stays: the entry replaced leads it
            results[name]["earlier_runs"] = [
                f"{before['source']} (measured {before.get('measured', '?')})",
                *before.get("earlier_runs", [])]
        print(f"{name} ({time.perf_counter() - started:.0f} s): {json.dumps(results[name])}",
              flush=True)
    results["machine"] = f"{os.cpu_count()} cores"
    path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
