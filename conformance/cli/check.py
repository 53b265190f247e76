"""`conformance check`: every applicable check on one checkpoint a contributor brings.

The checkpoint-level checks (processing and the model checks, against the HF model and native vLLM)
run once on fixed inputs; the case-level checks run their hypothesis suites for each subject.
Every cell goes through the one runner and the one judge, so a failure a known finding explains
is `xfail` with that finding's id: a known backend limitation, not the contributor's problem.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from conformance.cli.common import DEFAULT_SUBJECTS, csv, fail
from conformance.results.verdict import BAD, Verdict

DTYPES = ("auto", "float32", "bfloat16", "float16")


def add_arguments(check: argparse.ArgumentParser, default_output: str) -> None:
    check.add_argument("checkpoint", help="a local checkpoint folder or a hub id (owner/name)")
    check.add_argument("--checks", help="comma-separated checks (default: every applicable one)")
    check.add_argument("--transformers", metavar="VERSION",
                       help="run under this transformers version (an overlay, as `exec`)")
    check.add_argument("--device", default="cpu", help="model checks' device: cpu or cuda")
    check.add_argument("--dtype", default="auto", choices=DTYPES,
                       help="model checks' dtype (auto: float32 on cpu, bfloat16 on cuda)")
    check.add_argument("--profile", default="dev", choices=("dev", "ci", "nightly"),
                       help="hypothesis profile of the case-level checks (default: dev)")
    check.add_argument("--seed", type=int, help="the case-level checks' seed, to replay a "
                       "check (default: fixed for dev and ci, a new one per nightly run)")
    check.add_argument("--output", default=default_output,
                       help=f"report folder (default: {default_output})")
    check.add_argument("--export-repro", metavar="DIR",
                       help="where the standalone reproducers go (default: OUTPUT/repro)")


def rerun_argv(args: argparse.Namespace) -> list[str]:
    """The same `check`, without --transformers (the overlay is then in place)."""
    argv = [args.checkpoint, "--device", args.device, "--dtype", args.dtype, "--profile",
            args.profile, "--output", args.output]
    if args.checks:
        argv += ["--checks", args.checks]
    if args.seed is not None:
        argv += ["--seed", str(args.seed)]
    if args.export_repro:
        argv += ["--export-repro", args.export_repro]
    return argv


def rerun_under(version: str, args: argparse.Namespace) -> int:
    """Replace this process by the same check with transformers `version`'s overlay."""
    from conformance.run import versions

    overlay = versions.ensure_overlay(version)
    command = [sys.executable, "-m", "conformance", "check", *rerun_argv(args)]
    print(f"[conformance] transformers {version}: {' '.join(command[1:])}", flush=True)
    os.execvpe(command[0], command, overlay.environ())
    return 0  # not reached


def cmd_check(args: argparse.Namespace) -> int:
    from conformance.checks import check_ids
    from conformance.run.versions import installed_transformers

    if args.transformers and args.transformers != installed_transformers():
        return rerun_under(args.transformers, args)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # the verdicts, not vLLM's progress
    checks = csv(args.checks) or check_ids()
    if unknown := sorted(set(checks) - set(check_ids())):
        return fail(f"unknown check(s) {', '.join(unknown)} (known: {', '.join(check_ids())})")
    from conformance.inputs import checkpoints as checkpoint
    from conformance.subjects.serving import serving

    try:
        path = checkpoint.resolve(args.checkpoint)
        recipe = checkpoint.recipe_for(path, args.checkpoint)
        recipe, note = serving(path, recipe)
    except checkpoint.CheckpointError as error:
        return fail(str(error))
    dtype = args.dtype if args.dtype != "auto" else (
        "float32" if args.device == "cpu" else "bfloat16")
    from hypothesis import settings

    import conformance.inputs.strategies  # noqa: F401 - registers the profiles
    from conformance.core.settings import Settings
    from conformance.run.session import Session
    from conformance.run.suite import default_seed

    seed = default_seed(args.profile) if args.seed is None else args.seed
    out = Path(args.output)
    session = Session(Settings(device=args.device, dtype=dtype, profile=args.profile,
                               seed=seed), out)
    session.open(owns_folder=False)  # a folder of the user's: only the session's files
    settings.load_profile(args.profile)  # the suites run in this process
    repro_dir = Path(args.export_repro) if args.export_repro else out / "repro"
    print_header(args.checkpoint, path, recipe, note, installed_transformers(), args.device,
                 dtype)
    print(f"  case-level checks: profile {args.profile}, seed {seed}", flush=True)
    from conformance.results.standalone import write_standalone

    def with_reproducers() -> list[Verdict]:
        verdicts = run_checks(recipe, str(path), checks)
        for v in verdicts:
            if v.status not in ("pass", "n/a"):
                written = write_standalone(repro_dir, v, recipe, str(path), args.checkpoint)
                if written is not None:
                    v.data["reproducer"] = str(written)
        return verdicts

    session.here(with_reproducers)
    verdicts = session.write({
        "checkpoint": str(args.checkpoint), "architecture": recipe.architecture,
        "findings_of": recipe.name, "transformers": installed_transformers(),
        "device": args.device, "dtype": dtype, "profile": args.profile, "seed": seed,
        "checks": list(checks)})
    print_verdicts(verdicts)
    print(f"\nreports: {out}/ (report.md, report.html, results.json, junit.xml)")
    return 1 if any(v.status in BAD for v in verdicts) else 0


def print_header(ref: str, path: Path, recipe, note: str | None, version: str, device: str,
                 dtype: str) -> None:
    from conformance.subjects import vllm
    from fixtures.registry import RECIPE_MODULES

    oracle = ("native vLLM, the HF processor and the HF model" if recipe.native_in_vllm
              else "the HF processor and the HF model (no native vLLM model)")
    findings = (f"those of fixture {recipe.name} (same architecture)"
                if recipe.name in RECIPE_MODULES else "vLLM-wide ones only")
    length = "not derivable"
    for impl in (vllm.BACKEND, vllm.NATIVE):
        try:
            length = f"{vllm.derived_max_model_len(str(path), impl)} (derived by vLLM)"
            break
        except Exception:  # the backend's refusal is reported by the checks themselves
            continue
    print(f"{recipe.architecture} at {ref}: modalities {', '.join(recipe.modalities)}; oracle "
          f"{oracle}; transformers {version}; known findings: {findings}", flush=True)
    print(f"  max model length {length}; up to {recipe.max_items} item(s) per prompt; "
          f"model checks on {device} in {dtype}", flush=True)
    if note:
        print(f"  note: {note}", flush=True)


def run_checks(recipe, path: str, checks: tuple[str, ...]) -> list[Verdict]:
    """Every check in the registry's order: checkpoint-level cells once, suites per subject."""
    from conformance.checks import registry
    from conformance.core.vllms import current_label
    from conformance.results.verdict import CellKey
    from conformance.run.cell import run_checkpoint
    from conformance.run.plan import CHECKPOINT_SUBJECT
    from conformance.run.suite import run_suite
    from conformance.run.versions import installed_transformers

    version = installed_transformers()
    verdicts: list[Verdict] = []
    for check in (c for c in registry().values() if c.id in checks):
        if check.level == "checkpoint":
            key = CellKey(recipe.name, version, CHECKPOINT_SUBJECT, check.id,
                          current_label())
            found = [run_checkpoint(key, recipe, check, lambda: path, exhaustive=False)]
        else:
            found = [run_suite(recipe.name, subject, check.id, path=path, recipe=recipe,
                               repro_dir=None) for subject in DEFAULT_SUBJECTS]
        for v in found:
            cases = f" ({v.data['examples']} cases)" if "examples" in v.data else ""
            print(f"  {v.status:>7}  {v.subject} / {v.check}{cases} {v.seconds:.1f} s",
                  flush=True)
        verdicts += found
    return verdicts


def row_note(v: Verdict) -> str:
    if v.status == "xfail":
        return f"known backend limitation: {v.finding}"
    if v.status in BAD:
        return "new"
    if v.status == "n/a":
        return " ".join(v.detail.split())[:90]
    return ""


def print_verdicts(verdicts: list[Verdict]) -> None:
    from conformance import expectations
    from conformance.checks import get_check

    print(f"\n{'check':<13} {'subject':<13} {'verdict':<8} {'cases':>5}  finding")
    for v in verdicts:
        cases = v.data.get("examples", "-")
        print(f"{v.check:<13} {v.subject:<13} {v.status:<8} {cases:>5}  {row_note(v)}".rstrip())
    known: dict[str, list[Verdict]] = {}
    for v in verdicts:
        if v.status == "xfail":
            known.setdefault(v.finding, []).append(v)
    if known:
        print("\nKnown backend limitations (not this checkpoint's problem; `conformance known`):")
        for finding_id, cells in known.items():
            finding = expectations.get(finding_id)
            print(f"  - {finding_id}: {finding.title}\n      cells: "
                  + ", ".join(f"{v.check} ({v.subject})" for v in cells))
            for v in cells:
                if v.data.get("reproducer"):
                    print(f"      reproducer ({v.check}): {v.data['reproducer']}")
            if not any(v.data.get("reproducer") for v in cells):
                print("      no standalone reproducer for these checks: the failing case is in "
                      "results.json")
    new = [v for v in verdicts if v.status in BAD]
    if new:
        print("\nWhat to fix (new failures):")
        for v in new:
            repro = (f"\n      reproducer: {v.data['reproducer']}" if v.data.get("reproducer")
                     else "")
            print(f"  - {v.check} ({v.subject}), {v.status}: {' '.join(v.detail.split())[:400]}"
                  f"\n      hint: {get_check(v.check).hint}{repro}")
    elif not known:
        print("\nEvery applicable check passes.")
