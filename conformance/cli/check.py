"""`conformance check`: every applicable check on one checkpoint a contributor brings.

The checkpoint-level checks (processing and the model checks, against the HF model and native vLLM)
run once on fixed inputs; the case-level checks run their hypothesis suites for each subject.
Every cell goes through the one runner and the one judge, so a failure a known finding explains
is `xfail` with that finding's id: a known backend limitation, not the contributor's problem. A
failure that is the checkpoint's (or transformers', or native vLLM's too) is said so, with its
cause, by `run/attribution.py`; only the rest is listed under "What to fix". What vLLM,
transformers and torch print goes to the output folder's check.log, not between the verdicts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, TextIO

from conformance import expectations
from conformance.checks import check_ids, get_check
from conformance.cli.common import DEFAULT_SUBJECTS, csv, fail
from conformance.core.settings import Settings
from conformance.core.vllms import current_label
from conformance.inputs import checkpoints as checkpoint
from conformance.inputs.checkpoints import CheckpointError
from conformance.inputs.forms import OTHER_FORMS, parse_option
from conformance.results.cells import one_line
from conformance.results.standalone import write_standalone
from conformance.results.verdict import BAD, OWNER, Verdict
from conformance.run import attribution, versions
from conformance.run.attribution import Problem
from conformance.run.logs import LOGS, captured
from conformance.run.plan import Checkpoint, checkpoint_cells
from conformance.run.session import Session
from conformance.subjects import vllm
from conformance.subjects.serving import serving
from fixtures.registry import RECIPE_MODULES

DTYPES = ("auto", "float32", "bfloat16", "float16")
LOG = "check.log"  # in the output folder: what vLLM, transformers and torch write


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
    check.add_argument("--processor-option", action="append", default=[],
                       metavar="[SCOPE.]NAME=VALUE",
                       help="a processor option the case-level checks draw (repeatable; one set "
                            "of them all), e.g. images_kwargs.max_image_size='{\"longest_edge\""
                            ": 364}'; VALUE is JSON where it parses as JSON. Drawn model-level "
                            "flat and in each other form vLLM takes: scoped by modality, per "
                            "request, on disk in a copy of the checkpoint")
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
    for option in args.processor_option:
        argv += ["--processor-option", option]
    return argv


def processor_options(given: list[str]) -> dict[str, Any]:
    """`--processor-option` values as one flat option set (the scope a value names is the
    form the suites also draw, not a second option)."""
    options: dict[str, Any] = {}
    for text in given:
        _, name, value = parse_option(text)
        options[name] = value
    return options


def rerun_under(version: str, args: argparse.Namespace) -> int:
    """Replace this process by the same check with transformers `version`'s overlay."""
    overlay = versions.ensure_overlay(version)
    command = [sys.executable, "-m", "conformance", "check", *rerun_argv(args)]
    print(f"[conformance] transformers {version}: {' '.join(command[1:])}", flush=True)
    os.execvpe(command[0], command, overlay.environ())
    return 0  # not reached


def cmd_check(args: argparse.Namespace) -> int:
    if args.transformers:  # a malformed one is a one-line error before anything is installed
        args.transformers = versions.requested_version(args.transformers)
    if args.transformers and args.transformers != versions.installed_transformers():
        return rerun_under(args.transformers, args)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # the verdicts, not vLLM's progress
    checks = csv(args.checks) or check_ids()
    try:
        processor_options(args.processor_option)
    except ValueError as error:
        return fail(str(error))
    if unknown := sorted(set(checks) - set(check_ids())):
        return fail(f"unknown check(s) {', '.join(unknown)} (known: {', '.join(check_ids())})")
    try:
        with third_party_output(Path(args.output) / LOG) as console:
            return checked(args, checks, console)
    except CheckpointError as error:  # said once the terminal is the terminal again
        return fail(str(error))


def checked(args: argparse.Namespace, checks: tuple[str, ...], console: TextIO) -> int:
    """The check itself; what it says goes to `console`, everything else to the log."""
    def say(line: str = "") -> None:
        print(line, file=console, flush=True)

    path = checkpoint.resolve(args.checkpoint)
    if problem := attribution.probe_files(path):
        raise CheckpointError(problem.line())
    recipe = checkpoint.recipe_for(path, args.checkpoint)
    recipe, note = serving(path, recipe)
    if args.processor_option:  # the user's set stands for the architecture's own
        recipe = replace(recipe, processor_options=(processor_options(args.processor_option),))
    dtype = args.dtype if args.dtype != "auto" else (
        "float32" if args.device == "cpu" else "bfloat16")
    # at the top of this module they would load on every command's start (`conformance --help`)
    # lazy: the cell runner and the suites import hypothesis (+85 ms)
    from conformance.run import cell, suite

    seed = suite.default_seed(args.profile) if args.seed is None else args.seed
    out, version = Path(args.output), versions.installed_transformers()
    session = Session(Settings(device=args.device, dtype=dtype, profile=args.profile,
                               seed=seed), out)
    session.open(owns_folder=False)  # a folder of the user's: only the session's files
    repro_dir = Path(args.export_repro) if args.export_repro else out / "repro"
    say(header(args.checkpoint, path, recipe, note, version, args.device, dtype))
    say(f"  case-level checks: profile {args.profile}, seed {seed}")
    if args.processor_option:
        say(f"  processor options {dict(recipe.processor_options[0])}: model-level flat, and "
            f"drawn in the other forms ({', '.join(OTHER_FORMS)})")
    cells = checkpoint_cells(Checkpoint(str(path), recipe), checks, DEFAULT_SUBJECTS, version,
                             current_label())

    def with_reproducers() -> list[Verdict]:
        # before any model loads: the HF model transformers loads is the probe (and is reused)
        weights = (attribution.probe_weights(recipe, str(path), args.device, dtype)
                   if any(get_check(c).loads_model for c in checks) else None)
        # every cell through the one cell runner; whose problem a failure is, as each comes
        verdicts = cell.run_here(cells, out, lambda v: say(attributed(v, weights)))
        for v in verdicts:
            if v.status not in ("pass", "n/a") and OWNER not in v.data:
                written = write_standalone(repro_dir, v, recipe, str(path), args.checkpoint)
                if written is not None:
                    # absolute: the reports record it relative to their folder
                    v.data["reproducer"] = str(written.resolve())
        return verdicts

    session.here(with_reproducers)
    verdicts = session.write({
        "checkpoint": str(args.checkpoint), "architecture": recipe.architecture,
        "findings_of": recipe.name, "transformers": version,
        "device": args.device, "dtype": dtype, "profile": args.profile, "seed": seed,
        "checks": list(checks)})
    say(verdict_text(verdicts))
    say(f"\nreports: {out}/ (report.md, report.html, results.json, junit.xml; the output of "
        f"vLLM, transformers and torch: {LOG}, a failed cell's in {LOGS}/)")
    return exit_status(verdicts)


def attributed(v: Verdict, weights: Problem | None) -> str:
    """A failed cell whose problem is not the backend's keeps its owner (`OWNER`,
    `run/attribution.py`); the cell's line, as it comes."""
    if problem := attribution.attribute(v, weights, get_check(v.check).loads_model):
        v.data[OWNER] = asdict(problem)
    cases = f" ({v.data['examples']} cases)" if "examples" in v.data else ""
    if v.data.get("option_forms"):  # the forms its cases gave the options in
        cases += f" (option forms tried: {', '.join(v.data['option_forms'])})"
    owner = f" ({problem.owner})" if problem else ""
    return f"  {v.status:>7}  {v.subject} / {v.check}{cases} {v.seconds:.1f} s{owner}"


def exit_status(verdicts: list[Verdict]) -> int:
    """0: no failure of the backend's; 1: a new one; 2: only failures that are the
    checkpoint's (or transformers', or vLLM's) problem, as a checkpoint refused up front."""
    bad = [v for v in verdicts if v.status in BAD]
    if any(OWNER not in v.data for v in bad):
        return 1
    return 2 if bad else 0


@contextlib.contextmanager
def third_party_output(log: Path) -> Iterator[TextIO]:
    """Everything this process writes to its stdout and stderr (vLLM's and torch's C++
    warnings, Python warnings, loading bars, log records) goes to `log` (a bad cell's own
    output to its log, `run/logs.py`); the stream returned writes to the terminal's stdout, for
    the verdicts. `log` is this run's alone, and written only where its folder exists by the
    end: a checkpoint refused before any check leaves no folder behind."""
    sys.stdout.flush()
    console = open(os.dup(1), "w", encoding="utf-8", errors="replace", buffering=1)
    sink = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8")
    try:
        with sink, captured(sink):
            yield console
    finally:
        console.close()
        if log.parent.is_dir():
            shutil.move(sink.name, log)
        else:
            os.unlink(sink.name)


def header(ref: str, path: Path, recipe, note: str | None, version: str, device: str,
           dtype: str) -> str:
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
    lines = [f"{recipe.architecture} at {ref}: modalities {', '.join(recipe.modalities)}; "
             f"oracle {oracle}; transformers {version}; known findings: {findings}",
             f"  max model length {length}; up to {recipe.max_items} item(s) per prompt; "
             f"model checks on {device} in {dtype}"]
    if note:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def row_note(v: Verdict) -> str:
    if v.status == "xfail":
        return f"known backend limitation: {v.finding}"
    if OWNER in v.data:
        return v.data[OWNER]["owner"]  # its cause is listed below the table
    if v.status in BAD:
        return "new"
    if v.status == "n/a":
        return one_line(v.detail, 90)
    return ""


def verdict_text(verdicts: list[Verdict]) -> str:
    lines = [f"\n{'check':<13} {'subject':<13} {'verdict':<8} {'cases':>5}  finding"]
    for v in verdicts:
        cases = v.data.get("examples", "-")
        lines.append(f"{v.check:<13} {v.subject:<13} {v.status:<8} {cases:>5}  "
                     f"{row_note(v)}".rstrip())
    known: dict[str, list[Verdict]] = {}
    for v in verdicts:
        if v.status == "xfail":
            known.setdefault(v.finding, []).append(v)
    if known:
        lines.append("\nKnown backend limitations (not this checkpoint's problem; "
                     "`conformance known`):")
        for finding_id, cells in known.items():
            finding = expectations.get(finding_id)
            lines.append(f"  - {finding_id}: {finding.title}\n      cells: "
                         + ", ".join(f"{v.check} ({v.subject})" for v in cells))
            for v in cells:
                if v.data.get("reproducer"):
                    lines.append(f"      reproducer ({v.check}): {v.data['reproducer']}")
            if not any(v.data.get("reproducer") for v in cells):
                lines.append("      no standalone reproducer for these checks: the failing "
                             "case is in results.json")
    owned: dict[str, list[Verdict]] = {}
    for v in verdicts:
        if v.status in BAD and OWNER in v.data:
            owned.setdefault(Problem(**v.data[OWNER]).line(), []).append(v)
    if owned:
        lines.append("\nNot the backend's problem (nothing to fix in the backend):")
        for line, cells in owned.items():
            lines.append(f"  - {', '.join(f'{v.check} ({v.subject})' for v in cells)}: "
                         f"{line}")
    new = [v for v in verdicts if v.status in BAD and OWNER not in v.data]
    if new:
        lines.append("\nWhat to fix (new failures):")
        for v in new:
            repro = (f"\n      reproducer: {v.data['reproducer']}" if v.data.get("reproducer")
                     else "")
            lines.append(f"  - {v.check} ({v.subject}), {v.status}: "
                         f"{one_line(v.detail, 400)}"
                         f"\n      hint: {get_check(v.check).hint}{repro}")
    elif not known and not owned:
        lines.append("\nEvery applicable check passes.")
    return "\n".join(lines)
