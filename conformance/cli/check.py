"""`conformance check`: every applicable check on one checkpoint a contributor brings."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from conformance.cli.common import DEFAULT_SUBJECTS, fail
from conformance.results.verdict import BAD, Verdict


def cmd_check(args: argparse.Namespace) -> int:
    from conformance.inputs import checkpoints as checkpoint

    try:
        path = checkpoint.resolve(args.checkpoint)
        recipe = checkpoint.recipe_for(path, path.name)
        checkpoint.backend_serves(path, recipe)
    except checkpoint.CheckpointError as error:
        return fail(str(error))
    os.environ["CONFORMANCE_HYPOTHESIS_PROFILE"] = args.profile
    from conformance.checks import get_check, registry
    from conformance.results import report
    from conformance.results.verdict import CellKey
    from conformance.run.cell import run_checkpoint
    from conformance.run.plan import CHECKPOINT_SUBJECT
    from conformance.run.suite import run_suite
    from conformance.run.versions import installed_transformers

    version = installed_transformers()
    oracle = "native vLLM" if recipe.native_in_vllm else "HF (no native vLLM model)"
    print(f"{recipe.architecture} at {path}: modalities {', '.join(recipe.modalities)}; "
          f"oracle {oracle}; transformers {version}", flush=True)
    verdicts: list[Verdict] = []
    if recipe.native_in_vllm:
        key = CellKey(recipe.name, version, CHECKPOINT_SUBJECT, "processing")
        verdicts.append(run_checkpoint(key, recipe, get_check("processing"), lambda: str(path)))
    repro = Path(args.output) / "repro"
    for subject in DEFAULT_SUBJECTS:
        for check in (c.id for c in registry().values() if c.level == "case"):
            verdict = run_suite(recipe.name, subject, check, path=str(path), recipe=recipe,
                                repro_dir=repro)
            verdicts.append(verdict)
            print(f"  {verdict.status:>7}  {subject} / {check} "
                  f"({verdict.data.get('examples', 0)} cases)", flush=True)
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
                  f"      hint: {get_check(v.check).hint}{repro_note}")
    print(f"\nreports: {out}/")
    return 1 if any(v.status in BAD for v in verdicts) else 0
