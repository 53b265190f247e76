"""The `conformance` command line."""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

from conformance import report
from conformance.paths import REPORTS_DIR
from conformance.verdict import BAD, Verdict
from conformance.versions import DEFAULT_VERSIONS, ENV_VERSION, in_vllm_window

DEFAULT_CHECKS = ("processing", "model")


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def default_versions_for(check: str) -> tuple[str, ...]:
    """Loading models is slow: `model` runs on vLLM's window plus the first version beyond it."""
    if check != "model":
        return DEFAULT_VERSIONS
    beyond = [v for v in DEFAULT_VERSIONS if not in_vllm_window(v)]
    return tuple(v for v in DEFAULT_VERSIONS if in_vllm_window(v) or v == beyond[:1][0])


def cmd_run(args: argparse.Namespace) -> int:
    from conformance.matrix import Plan, run_plan
    from fixtures.registry import available_recipes

    fixtures = _csv(args.fixtures) if args.fixtures else available_recipes()
    checks = _csv(args.checks) if args.checks else DEFAULT_CHECKS
    versions = _csv(args.versions) if args.versions else None
    unknown = sorted(set(checks) - {"processing", "model"})
    if unknown:
        print(f"error: unknown check(s) {', '.join(unknown)} (known: processing, model)",
              file=sys.stderr)
        return 2
    run_dir = Path(args.output) if args.output else REPORTS_DIR / "runs" / "latest"
    run_dir.mkdir(parents=True, exist_ok=True)
    partial = run_dir / "results.jsonl"
    if not args.resume and partial.exists():
        partial.unlink()
    verdicts = report.read_partial(partial)
    done = {v.key for v in verdicts}
    started = time.monotonic()

    def record(verdict: Verdict) -> None:
        verdicts.append(verdict)
        report.append(partial, verdict)
        print(f"  {verdict.status:>7}  {verdict.fixture} / {verdict.check} / transformers "
              f"{verdict.version}  ({verdict.seconds:.1f} s)", flush=True)

    for check in checks:
        for version in versions or default_versions_for(check):
            print(f"transformers {version}: {check} on {', '.join(fixtures)}", flush=True)
            plan = Plan(fixtures=fixtures, versions=(version,), checks=(check,),
                        timeout_s=args.timeout)
            run_plan(plan, run_dir, record, done)
    meta = {
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - started, 1),
        "fixtures": list(fixtures), "checks": list(checks),
        "environment_transformers": ENV_VERSION,
    }
    report.write_results(run_dir / "results.json", verdicts, meta)
    (run_dir / "report.md").write_text(report.markdown(verdicts))
    report.print_table(verdicts)
    print(f"reports: {run_dir}/results.json, {run_dir}/report.md")
    return 1 if any(v.status in BAD for v in verdicts) else 0


def cmd_versions(args: argparse.Namespace) -> int:
    from conformance import versions

    if args.action == "lock":
        print(f"wrote {versions.write_overlay_lock()}")
        return 0
    targets = _csv(args.versions) if args.versions else DEFAULT_VERSIONS
    for version in targets:
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

    names = _csv(args.fixtures) if args.fixtures else available_recipes()
    if args.action == "list":
        for name in names:
            recipe = get_recipe(name)
            bounds = f"{recipe.min_transformers or '-'} .. {recipe.max_transformers or '-'}"
            print(f"{name:<14} {recipe.architecture:<42} {','.join(recipe.modalities):<12} "
                  f"transformers {bounds}  mirrors {recipe.mirrors}")
        return 0
    from fixtures.build import build_fixture, tree_digest

    for name in names:
        started = time.monotonic()
        path = build_fixture(name, force=args.force)
        seconds = time.monotonic() - started
        print(f"{name}: {path} ({seconds:.2f} s, sha256 {tree_digest(path)[:16]})")
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    import os

    from conformance import versions

    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    if not command:
        print("error: nothing to run (conformance exec --transformers V -- COMMAND ...)",
              file=sys.stderr)
        return 2
    overlay = versions.ensure_overlay(args.transformers)
    print(f"[conformance] transformers {args.transformers}: {' '.join(command)}", flush=True)
    env = overlay.environ()
    env["PATH"] = os.path.join(sys.prefix, "bin") + os.pathsep + env.get("PATH", "")
    os.execvpe(command[0], command, env)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="conformance",
        description="Conformance harness for vLLM's Transformers backend for multimodal models.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the matrix (fixtures x transformers versions x checks)")
    run.add_argument("--fixtures", help="comma-separated fixture names (default: all)")
    run.add_argument("--versions", help="comma-separated transformers versions "
                     f"(default: {','.join(DEFAULT_VERSIONS)}; `model` on vLLM's window + 1)")
    run.add_argument("--checks", help="comma-separated checks (default: processing,model)")
    run.add_argument("--output", help="run folder (default: reports/runs/latest)")
    run.add_argument("--resume", action="store_true", help="keep finished cells of the run folder")
    run.add_argument("--timeout", type=float, default=1800.0, help="seconds per worker")
    run.set_defaults(func=cmd_run)

    ver = sub.add_parser("versions", help="list, install or lock transformers overlays")
    ver.add_argument("action", choices=("list", "install", "lock"))
    ver.add_argument("--versions", help="comma-separated versions (default: the matrix)")
    ver.set_defaults(func=cmd_versions)

    fix = sub.add_parser("fixtures", help="list or build the offline fixtures")
    fix.add_argument("action", choices=("list", "build"))
    fix.add_argument("--fixtures", help="comma-separated fixture names (default: all)")
    fix.add_argument("--force", action="store_true", help="rebuild even if cached")
    fix.set_defaults(func=cmd_fixtures)

    exe = sub.add_parser("exec", help="run a command with another transformers version active")
    exe.add_argument("--transformers", required=True, help="transformers version, e.g. 5.12.1")
    exe.add_argument("command_line", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    exe.set_defaults(func=cmd_exec)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (KeyError, ValueError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
