"""The `conformance` command line (also `python -m conformance`): one module per command group."""

from __future__ import annotations

import argparse
import sys

from conformance.cli.bisect import add_arguments as add_bisect_arguments
from conformance.cli.bisect import cmd_bisect
from conformance.cli.check import add_arguments as add_check_arguments
from conformance.cli.check import cmd_check
from conformance.cli.common import BASELINE, fail, not_a_checkout, other_checkout
from conformance.cli.coverage import add_arguments as add_coverage_arguments
from conformance.cli.coverage import cmd_coverage
from conformance.cli.env import cmd_exec, cmd_fixtures, cmd_versions
from conformance.cli.results import (
    cmd_baseline,
    cmd_checks,
    cmd_findings,
    cmd_gate,
    cmd_known,
    cmd_merge,
)
from conformance.cli.run import cmd_run
from conformance.core.settings import (
    RUNNERS,
    ignored_by_runner,
    removed_variables,
    unknown_variables,
)
from conformance.core.vllms import DEFAULT_VLLM
from conformance.paths import REPORTS_DIR
from conformance.run.versions import DEFAULT_VERSIONS, FULL_VERSIONS

__all__ = ["BASELINE", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="conformance",
        description="Conformance harness for vLLM's Transformers backend for multimodal models.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="the main job: fixtures x versions x subjects x checks")
    run.add_argument("--fixtures", help="comma-separated fixtures (default: all); a config "
                     "variant by its name, e.g. llava~full (docs/fixtures.md)")
    run.add_argument("--variants", action="store_true", help="add every config variant of the "
                     "fixtures run (fixture~variant rows: docs/fixtures.md); not by default")
    run.add_argument("--versions", help="comma-separated transformers versions, `full` "
                     f"({','.join(FULL_VERSIONS)} on every vLLM: the nightly's) or `rest` (the "
                     "full matrix's cells the main job leaves out); default: "
                     f"{','.join(DEFAULT_VERSIONS)}, each vLLM on the newest of each "
                     "placeholder path inside its own window and on the newest "
                     "(docs/versions.md)")
    run.add_argument("--vllm", help="comma-separated vLLMs under test: releases (each in its "
                     "own environment, built on demand) or folders holding a vllm package (a "
                     "source checkout, an unpacked wheel: first on the path of the release of "
                     f"its version); default: {DEFAULT_VLLM}, or the vLLM installed where the "
                     "harness runs when that is another version")
    run.add_argument("--python", action="append", default=[], metavar="PATH",
                     help="the interpreter of an environment that already has vLLM (vLLM's CI "
                     "environment, a nightly, an editable checkout): its vLLM is tested there, "
                     "labelled VERSION@ENVIRONMENT; repeatable, beside --vllm")
    run.add_argument("--subjects", help="comma-separated subjects: vllm-backend (the default), "
                     "impl (our reference of the backend, following the release profile of "
                     "the vLLM under test: impl/release.py)")
    run.add_argument("--checks", help="comma-separated checks (default: all)")
    run.add_argument("--profile", default="dev", choices=("dev", "ci", "nightly"),
                     help="hypothesis profile (default: dev)")
    run.add_argument("--seed", type=int, help="the suites' seed, to replay a run (default: "
                     "fixed for dev and ci, a new one per nightly run; results.json records it)")
    run.add_argument("--jobs", type=int, default=None,
                     help="workers at once, each on its own share of the CPUs (default: the "
                     "CPUs this process may use, at most 4, on --device cpu; 1 on cuda)")
    run.add_argument("--device", default="cpu", help="model checks' device: cpu or cuda")
    run.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                     help="model checks' dtype; tolerances follow the GPU noise floor")
    run.add_argument("--shard", help="i/n: run only shard i of n (1-based)")
    run.add_argument("--output", help="run folder (default: reports/runs/latest, which holds "
                     "the latest run: a new run replaces it); one that holds an earlier run's "
                     "results takes --resume or --fresh")
    again = run.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="keep the run folder's finished cells and run the others")
    again.add_argument("--fresh", action="store_true",
                       help="start the run folder over (its earlier results are deleted)")
    run.add_argument("--cell-timeout", type=float, default=900.0, help="seconds per cell")
    run.add_argument("--fault", help="plant a fault in every cell of its subject, e.g. "
                                     "'backend-bos-doubled' (the fault proofs; a demonstration)")
    run.add_argument("--allow-unmet", metavar="DEP", help="comma-separated packages whose "
                     "requirement a version may run without where the package index cannot meet "
                     "it (e.g. kernels); recorded in results.json and the reports "
                     "(docs/versions.md). Never the default")
    run.set_defaults(func=cmd_run)

    check = sub.add_parser("check", help="every applicable check on one checkpoint")
    add_check_arguments(check, str(REPORTS_DIR / "runs" / "check"))
    check.set_defaults(func=cmd_check)

    gate = sub.add_parser(
        "gate", help="exit 1 when a cell is worse than in the baseline",
        description="Compare a run with the baseline: exit 0 (pass), 1 (a cell is worse) or 2 "
        "(no cell compared: never a pass). A transformers version the baseline lacks is "
        "compared with the baseline's nearest version: the newest not newer than it, else the "
        "oldest (5.23.0 with 5.20.2); a vLLM the baseline lacks likewise. The first lines say "
        "which.")
    gate.add_argument("results", help="results.json (or its run folder)")
    gate.add_argument("--baseline", default=str(BASELINE), help="default: reports/baseline.json")
    gate.add_argument("--show-missing", action="store_true", help="list baseline cells not run")
    gate.add_argument("--baseline-version", help="compare every cell with the baseline's cell "
                      "on this transformers version (gating a candidate against the pin; "
                      "default: the same version, else the baseline's nearest)")
    gate.add_argument("--baseline-vllm", help="compare every cell with the baseline's cell "
                      f"of this vLLM (e.g. {DEFAULT_VLLM}: what changed on the vLLM under test; "
                      "default: the same vLLM, else the baseline's nearest)")
    gate.add_argument("--details", action="store_true", help="list every cell (default: a "
                      "summary grouped by finding and by difference, with a few cells each)")
    gate.add_argument("--json", action="store_true", help="print the verdict as JSON: "
                      "status, cells compared, baseline columns used, every cell of each list")
    gate.add_argument("--accept", action="append", default=[], metavar="FINDING",
                      help="let cells that passed in the baseline and this finding explains "
                      "now through (repeatable; '*': every finding)")
    gate.set_defaults(func=cmd_gate)

    base = sub.add_parser("baseline", help="refresh the committed baseline from a run's results")
    base.add_argument("results", help="results.json (or its run folder)")
    base.add_argument("--output", default=str(BASELINE), help="default: reports/baseline.json")
    base.set_defaults(func=cmd_baseline)

    bis = sub.add_parser("bisect", help="first transformers release where a cell goes bad, "
                         "or where a finding appears or disappears")
    add_bisect_arguments(bis)
    bis.set_defaults(func=cmd_bisect)

    merge = sub.add_parser("merge", help="combine the results of shards into one report")
    merge.add_argument("results", nargs="+", help="results.json files or run folders")
    merge.add_argument("--output", default=str(REPORTS_DIR / "runs" / "merged"))
    merge.set_defaults(func=cmd_merge)

    ver = sub.add_parser("versions", help="list, install or lock transformers overlays; "
                         "`newest`: the newest release that installs (the weekly gate's); "
                         "`newest-vllm`: the newest vLLM release on the package index; "
                         "`vllm-facts`: what each vLLM release's metadata and registry say")
    ver.add_argument("action", choices=("list", "install", "lock", "newest", "newest-vllm",
                                        "vllm-facts"))
    ver.add_argument("--versions", help="comma-separated versions (default: the full matrix; for "
                     "`newest`, every stable release on the package index)")
    ver.add_argument("--vllm", default=DEFAULT_VLLM, help="the vLLM release whose environment "
                     f"the overlays go over (default: {DEFAULT_VLLM})")
    ver.add_argument("--write", action="store_true", help="vllm-facts: record the releases "
                     "whose environments this machine has in reports/vllm_facts.json")
    ver.set_defaults(func=cmd_versions)

    fix = sub.add_parser("fixtures", help="list or build the offline fixtures")
    fix.add_argument("action", choices=("list", "build"))
    fix.add_argument("--fixtures", help="comma-separated fixture names (default: all)")
    fix.add_argument("--profile", default="tiny", choices=("tiny", "real"))
    fix.add_argument("--force", action="store_true", help="rebuild even if cached")
    fix.add_argument("--json", action="store_true", help="list: as JSON")
    fix.set_defaults(func=cmd_fixtures)

    cov = sub.add_parser("coverage", help="the generative multimodal architectures of each "
                         "transformers version, vLLM's route for each, and their fixtures")
    add_coverage_arguments(cov)
    cov.set_defaults(func=cmd_coverage)

    checks = sub.add_parser("checks", help="the catalogue of checks, as a Markdown table")
    checks.add_argument("--json", action="store_true", help="as JSON")
    checks.set_defaults(func=cmd_checks)

    found = sub.add_parser("findings", help="the known findings, one line each: id, checks, "
                           "transformers and vLLM bounds, upstream link")
    found.add_argument("--json", action="store_true", help="as JSON")
    found.set_defaults(func=cmd_findings)

    known = sub.add_parser("known", help="the known findings, as a Markdown document")
    known.add_argument("--write", action="store_true",
                       help="write it to docs/findings.md instead of printing it")
    known.set_defaults(func=cmd_known)

    exe = sub.add_parser("exec", help="run a command with another transformers version (and vLLM) "
                         "active")
    exe.add_argument("--transformers", help="transformers version, e.g. 5.12.1 (with --vllm: "
                     "default the newest of the main job's versions in that vLLM's window)")
    exe.add_argument("--vllm", help="a vLLM release or folder, as its workers run it (a release "
                     "with no build here: its wheel's Python over the default environment), or "
                     "`newest`: the default axis's newest release; default: the environment's")
    exe.add_argument("command_line", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    exe.set_defaults(func=cmd_exec)
    return parser


def main(argv: list[str] | None = None) -> int:
    if refusal := not_a_checkout() or other_checkout():
        return fail(refusal)
    args = build_parser().parse_args(argv)
    for name in unknown_variables():  # a typo, or a setting that no longer exists
        print(f"warning: {name} is set but no setting of this harness reads it (ignored)",
              file=sys.stderr)
    for name, instead in removed_variables():  # how it was done before
        print(f"warning: {name} is no longer read: use {instead} (ignored)", file=sys.stderr)
    if args.command in RUNNERS:
        for name, option in ignored_by_runner():
            print(f"warning: {name} is set but `conformance {args.command}` takes {option} "
                  "instead (ignored)", file=sys.stderr)
    try:
        return args.func(args)
    except (KeyError, ValueError, RuntimeError, OSError) as error:
        return fail(str(error).strip('"'))


if __name__ == "__main__":
    sys.exit(main())
