"""The `conformance` command line (also `python -m conformance`)."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

from conformance.paths import REPORTS_DIR
from conformance.verdict import BAD, CellKey, Verdict
from conformance.versions import DEFAULT_VERSIONS, ENV_VERSION, in_vllm_window

BASELINE = REPORTS_DIR / "baseline.json"
DEFAULT_SUBJECTS = ("impl", "vllm-backend")


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


# ---------------------------------------------------------------------------------------- run
def cmd_run(args: argparse.Namespace) -> int:
    from conformance import report
    from conformance.cells import ALL_CHECKS
    from conformance.plan import expand_cells, shard
    from fixtures.registry import RECIPE_MODULES, available_recipes

    fixtures = _csv(args.fixtures) or available_recipes()
    checks = _csv(args.checks) or ALL_CHECKS
    subjects = _csv(args.subjects) or DEFAULT_SUBJECTS
    versions = _csv(args.versions) or DEFAULT_VERSIONS
    for kind, given, known in (("fixture", fixtures, RECIPE_MODULES), ("check", checks, ALL_CHECKS),
                               ("subject", subjects, DEFAULT_SUBJECTS)):
        if unknown := sorted(set(given) - set(known)):
            return _fail(f"unknown {kind}(s) {', '.join(unknown)} (known: {', '.join(known)})")
    os.environ["CONFORMANCE_HYPOTHESIS_PROFILE"] = args.profile
    os.environ["CONFORMANCE_DEVICE"], os.environ["CONFORMANCE_DTYPE"] = args.device, args.dtype
    cells = expand_cells(fixtures, versions, subjects, checks)
    if args.shard:
        index, _, count = args.shard.partition("/")
        cells = shard(cells, int(index), int(count))
    run_dir = Path(args.output) if args.output else REPORTS_DIR / "runs" / "latest"
    run_dir.mkdir(parents=True, exist_ok=True)
    partial = run_dir / "results.jsonl"
    if not args.resume:
        for stale in run_dir.glob("*"):
            if stale.is_file():
                stale.unlink()
    verdicts = report.read_partial(partial)
    done = {v.key for v in verdicts}
    todo = [c for c in cells if c not in done]
    print(f"{len(cells)} cells ({len(done & set(cells))} already done): "
          f"{len(fixtures)} fixtures x {len(versions)} transformers versions x "
          f"{len(subjects)} subjects x {len(checks)} checks; profile {args.profile}; "
          f"{args.jobs} job(s)", flush=True)
    started = time.monotonic()
    with Progress(len(cells), len(cells) - len(todo)) as progress:
        def record(verdict: Verdict) -> None:
            verdicts.append(verdict)
            report.append(partial, verdict)
            progress.finished(verdict)

        from conformance.matrix import run_cells

        run_cells(todo, run_dir, record, jobs=args.jobs, cell_timeout=args.cell_timeout,
                  on_start=progress.started)
    meta = {
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - started, 1),
        "fixtures": list(fixtures), "versions": list(versions), "subjects": list(subjects),
        "checks": list(checks), "profile": args.profile, "shard": args.shard,
        "device": args.device, "dtype": args.dtype,
        "environment_transformers": ENV_VERSION,
    }
    cell_set = set(cells)
    verdicts = [v for v in report.latest_per_cell(verdicts) if v.key in cell_set]
    report.write_reports(run_dir, verdicts, meta)
    report.print_table(verdicts)
    print(f"reports: {run_dir}/ (results.json, report.md, report.html, junit.xml)")
    return 1 if any(v.status in BAD for v in verdicts) else 0


class Progress:
    """Cells done, running and failed, with an estimate of the time left (rich, on a TTY)."""

    def __init__(self, total: int, done: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        self.console = Console(stderr=False)
        self.bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                MofNCompleteColumn(), TimeRemainingColumn(), console=self.console,
                                transient=False, disable=not self.console.is_terminal)
        self.task = self.bar.add_task("", total=total, completed=done)
        self.running: set[CellKey] = set()
        self.failed = 0

    def __enter__(self) -> Progress:
        self.bar.__enter__()
        self._describe()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.__exit__(*exc)

    def _describe(self) -> None:
        running = ", ".join(f"{k.fixture}/{k.check}@{k.version}" for k in sorted(self.running))
        self.bar.update(self.task, description=f"failed {self.failed} | running {running or '-'}")

    def started(self, key: CellKey) -> None:
        self.running.add(key)
        self._describe()

    def finished(self, verdict: Verdict) -> None:
        self.running.discard(verdict.key)
        self.failed += verdict.status in BAD
        self.bar.advance(self.task)
        self._describe()
        if not self.console.is_terminal or verdict.status in BAD:
            self.bar.console.print(f"  {verdict.status:>7}  {verdict.key.label()} "
                                   f"({verdict.seconds:.1f} s)", highlight=False, markup=False)


# -------------------------------------------------------------------------------- gate etc.
def cmd_gate(args: argparse.Namespace) -> int:
    from conformance import gate, report

    baseline, _ = report.read_results(Path(args.baseline))
    current, _ = report.read_results(Path(args.results))
    result = gate.compare(baseline, current, compare_missing=args.show_missing,
                          baseline_version=args.baseline_version)
    print(gate.render(result))
    return 0 if result.ok else 1


def cmd_baseline(args: argparse.Namespace) -> int:
    from conformance import report

    verdicts, meta = report.read_results(Path(args.results))
    out = Path(args.output)
    report.write_results(out, report.latest_per_cell(verdicts), {**meta, "baseline_of": str(
        args.results)})
    print(f"wrote {out} from {args.results} ({len(verdicts)} cells)")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from conformance import report

    verdicts: list[Verdict] = []
    metas = []
    for path in args.results:
        got, meta = report.read_results(Path(path))
        verdicts += got
        metas.append(meta)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"merged_from": list(args.results),
            "seconds": sum(m.get("seconds") or 0 for m in metas)}
    report.write_reports(out, verdicts, meta)
    merged = report.latest_per_cell(verdicts)
    print(f"merged {len(args.results)} results into {out}/ ({len(merged)} cells)")
    return 1 if any(v.status in BAD for v in merged) else 0


def cmd_bisect(args: argparse.Namespace) -> int:
    from conformance import bisect

    versions = list(_csv(args.versions)) or bisect.released_versions(args.good, args.bad)
    if not versions or versions[0] != args.good or versions[-1] != args.bad:
        return _fail(f"{args.good} and {args.bad} must both be released versions "
                     f"(found {versions[:1]} .. {versions[-1:]})")
    subject = args.subject or ("vllm-backend" if args.check in ("processing", "model")
                               else "impl")
    print(f"bisecting {args.arch} / {subject} / {args.check} over {len(versions)} releases "
          f"{versions[0]} .. {versions[-1]}" + (f" (planted fault {args.fault})"
                                                  if args.fault else ""))
    probe = bisect.probe_cell(args.arch, subject, args.check, args.fault)
    try:
        result = bisect.bisect(versions, probe)
    except ValueError as error:
        return _fail(str(error), 1)
    good, bad = result.verdicts[result.last_good], result.verdicts[result.first_bad]
    print(f"first bad release: transformers {result.first_bad} (last good {result.last_good})")
    print(f"  {result.last_good}: {good.status} {' '.join(good.detail.split())[:300]}")
    print(f"  {result.first_bad}: {bad.status} {' '.join(bad.detail.split())[:500]}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from conformance import checkpoint

    try:
        path = checkpoint.resolve(args.checkpoint)
        recipe = checkpoint.recipe_for(path, path.name)
        checkpoint.backend_serves(path, recipe)
    except checkpoint.CheckpointError as error:
        return _fail(str(error))
    os.environ["CONFORMANCE_HYPOTHESIS_PROFILE"] = args.profile
    from conformance import report
    from conformance.checks import CHECK_IDS
    from conformance.smoke import check_processing, judge
    from conformance.suite import run_suite
    from conformance.versions import installed_transformers

    version = installed_transformers()
    oracle = "native vLLM" if recipe.native_in_vllm else "HF (no native vLLM model)"
    print(f"{recipe.architecture} at {path}: modalities {', '.join(recipe.modalities)}; "
          f"oracle {oracle}; transformers {version}", flush=True)
    verdicts: list[Verdict] = []
    if recipe.native_in_vllm:
        started = time.monotonic()
        try:
            difference, data = check_processing(recipe, str(path))
            verdicts.append(judge(recipe.name, "processing", version, difference, data,
                                  time.monotonic() - started))
        except Exception as error:
            verdicts.append(Verdict(recipe.name, version, "processing", "error",
                                    f"{type(error).__name__}: {error}"))
    repro = Path(args.output) / "repro"
    for subject in DEFAULT_SUBJECTS:
        for check in CHECK_IDS:
            result = run_suite(recipe.name, subject, check, path=str(path), recipe=recipe,
                               repro_dir=repro)
            data = {"reproducer": result.reproducer} if result.reproducer else {}
            verdicts.append(Verdict(recipe.name, version, check, result.status, result.evidence,
                                    result.seconds, data, subject))
            print(f"  {result.status:>7}  {subject} / {check} ({result.examples} cases)",
                  flush=True)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    report.write_reports(out, verdicts, {"checkpoint": str(args.checkpoint)})
    print()
    print(f"{'subject':<13} {'check':<13} verdict")
    for v in verdicts:
        print(f"{v.subject:<13} {v.check:<13} {v.status}")
    bad = [v for v in verdicts if v.status in BAD or v.status == "xfail"]
    if bad:
        print("\nWhat to fix:")
        for v in bad:
            repro_note = f"\n      reproducer: {v.data['reproducer']}" if v.data.get(
                "reproducer") else ""
            print(f"  - {v.subject} / {v.check}: {' '.join(v.detail.split())[:400]}\n"
                  f"      hint: {checkpoint.HINTS.get(v.check, '')}{repro_note}")
    print(f"\nreports: {out}/")
    return 1 if any(v.status in BAD for v in verdicts) else 0


# ------------------------------------------------------------------------- env and fixtures
def cmd_versions(args: argparse.Namespace) -> int:
    from conformance import versions

    if args.action == "lock":
        print(f"wrote {versions.write_overlay_lock()}")
        return 0
    for version in _csv(args.versions) or DEFAULT_VERSIONS:
        if args.action == "install":
            started = time.monotonic()
            overlay = versions.ensure_overlay(version)
            print(f"{version}: ready in {time.monotonic() - started:.1f} s at "
                  f"{overlay.path or 'the environment itself'}")
        else:
            window = "inside vLLM's window" if in_vllm_window(version) else "beyond vLLM's pin"
            print(f"{version}  {versions.placeholder_strategy(version):>7} path  {window}")
    return 0


def cmd_fixtures(args: argparse.Namespace) -> int:
    from fixtures.registry import available_recipes, get_recipe

    names = _csv(args.fixtures) or available_recipes()
    if args.action == "list":
        for name in names:
            recipe = get_recipe(name)
            bounds = f"{recipe.min_transformers or '-'} .. {recipe.max_transformers or '-'}"
            print(f"{name:<16} {recipe.architecture:<40} {','.join(recipe.modalities):<12} "
                  f"transformers {bounds:<16} mirrors {recipe.mirrors}")
        return 0
    from fixtures.build import build_fixture, tree_digest

    for name in names:
        started = time.monotonic()
        path = build_fixture(name, args.profile, force=args.force)
        seconds = time.monotonic() - started
        print(f"{name}: {path} ({seconds:.2f} s, sha256 {tree_digest(path)[:16]})")
    return 0


def cmd_known(args: argparse.Namespace) -> int:
    from conformance.expectations import markdown_table

    print(markdown_table(), end="")
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    from conformance import versions

    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    if not command:
        return _fail("nothing to run (conformance exec --transformers V -- COMMAND ...)")
    overlay = versions.ensure_overlay(args.transformers)
    print(f"[conformance] transformers {args.transformers}: {' '.join(command)}", flush=True)
    env = overlay.environ()
    env["PATH"] = os.path.join(sys.prefix, "bin") + os.pathsep + env.get("PATH", "")
    os.execvpe(command[0], command, env)


# ----------------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="conformance",
        description="Conformance harness for vLLM's Transformers backend for multimodal models.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="the main job: fixtures x versions x subjects x checks")
    run.add_argument("--fixtures", help="comma-separated fixtures (default: all)")
    run.add_argument("--versions", help="comma-separated transformers versions (default: "
                     f"{','.join(DEFAULT_VERSIONS)}; `model` on vLLM's window + 1)")
    run.add_argument("--subjects", help="comma-separated subjects (default: impl,vllm-backend)")
    run.add_argument("--checks", help="comma-separated checks (default: all)")
    run.add_argument("--profile", default="dev", choices=("dev", "ci", "nightly"),
                     help="hypothesis profile (default: dev)")
    run.add_argument("--jobs", type=int, default=1, help="versions run at once (default: 1)")
    run.add_argument("--device", default="cpu", help="model checks' device: cpu or cuda")
    run.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                     help="model checks' dtype; tolerances follow the GPU noise floor")
    run.add_argument("--shard", help="i/n: run only shard i of n (1-based)")
    run.add_argument("--output", help="run folder (default: reports/runs/latest)")
    run.add_argument("--resume", action="store_true", help="keep the run folder's finished cells")
    run.add_argument("--cell-timeout", type=float, default=900.0, help="seconds per cell")
    run.set_defaults(func=cmd_run)

    check = sub.add_parser("check", help="every applicable check on one checkpoint")
    check.add_argument("checkpoint", help="a local checkpoint folder or a hub id (owner/name)")
    check.add_argument("--profile", default="dev", choices=("dev", "ci", "nightly"))
    check.add_argument("--output", default=str(REPORTS_DIR / "runs" / "check"),
                       help="report folder (default: reports/runs/check)")
    check.set_defaults(func=cmd_check)

    gate = sub.add_parser("gate", help="exit 1 when a cell that passed in the baseline fails now")
    gate.add_argument("results", help="results.json (or its run folder)")
    gate.add_argument("--baseline", default=str(BASELINE), help="default: reports/baseline.json")
    gate.add_argument("--show-missing", action="store_true", help="list baseline cells not run")
    gate.add_argument("--baseline-version", help="compare every cell with the baseline's cell "
                      "on this transformers version (gating a candidate against the pin)")
    gate.set_defaults(func=cmd_gate)

    base = sub.add_parser("baseline", help="refresh the committed baseline from a run's results")
    base.add_argument("results", help="results.json (or its run folder)")
    base.add_argument("--output", default=str(BASELINE), help="default: reports/baseline.json")
    base.set_defaults(func=cmd_baseline)

    bis = sub.add_parser("bisect", help="first transformers release where a cell goes bad")
    bis.add_argument("--arch", required=True, help="fixture name, e.g. gemma3")
    bis.add_argument("--check", required=True, help="check id, e.g. prompt-ids")
    bis.add_argument("--subject", help="default: impl (vllm-backend for processing/model)")
    bis.add_argument("--good", required=True, help="a release where the cell is good")
    bis.add_argument("--bad", required=True, help="a release where the cell is bad")
    bis.add_argument("--versions", help="comma-separated releases to search (default: every "
                     "stable release between --good and --bad on the package index)")
    bis.add_argument("--fault", help="plant an impl fault, e.g. 'offset-shift>=5.16.1' (demo)")
    bis.set_defaults(func=cmd_bisect)

    merge = sub.add_parser("merge", help="combine the results of shards into one report")
    merge.add_argument("results", nargs="+", help="results.json files or run folders")
    merge.add_argument("--output", default=str(REPORTS_DIR / "runs" / "merged"))
    merge.set_defaults(func=cmd_merge)

    ver = sub.add_parser("versions", help="list, install or lock transformers overlays")
    ver.add_argument("action", choices=("list", "install", "lock"))
    ver.add_argument("--versions", help="comma-separated versions (default: the matrix)")
    ver.set_defaults(func=cmd_versions)

    fix = sub.add_parser("fixtures", help="list or build the offline fixtures")
    fix.add_argument("action", choices=("list", "build"))
    fix.add_argument("--fixtures", help="comma-separated fixture names (default: all)")
    fix.add_argument("--profile", default="tiny", choices=("tiny", "real"))
    fix.add_argument("--force", action="store_true", help="rebuild even if cached")
    fix.set_defaults(func=cmd_fixtures)

    known = sub.add_parser("known", help="the known incompatibilities, as a Markdown table")
    known.set_defaults(func=cmd_known)

    exe = sub.add_parser("exec", help="run a command with another transformers version active")
    exe.add_argument("--transformers", required=True, help="transformers version, e.g. 5.12.1")
    exe.add_argument("command_line", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    exe.set_defaults(func=cmd_exec)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (KeyError, ValueError, RuntimeError, OSError) as error:
        return _fail(str(error).strip('"'))


if __name__ == "__main__":
    sys.exit(main())
