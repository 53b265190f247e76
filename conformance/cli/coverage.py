"""`conformance coverage`: the generative multimodal architectures of each transformers version,
what vLLM's registry does with each, and which of them have a fixture."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

from conformance.cli.common import fail
from conformance.inputs.coverage import BACKEND_ONLY, FALLBACK


def probe_version(version: str) -> dict[str, Any]:
    """The probe, run in a process with `version`'s transformers (its overlay)."""
    from conformance.run import versions

    env = versions.ensure_overlay(version).environ()
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")
    out = subprocess.run([sys.executable, "-m", "conformance.inputs.coverage"], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines() or ["no output"]
        raise RuntimeError(f"the coverage probe failed on transformers {version}: {lines[-1]}")
    return json.loads(out.stdout)


def fixtures_by_architecture() -> dict[str, list[str]]:
    from fixtures.registry import recipes_by_architecture

    return {architecture: [r.name for r in recipes]
            for architecture, recipes in recipes_by_architecture().items()}


def table(probes: list[dict[str, Any]], fixtures: dict[str, list[str]]) -> list[str]:
    """One row per model type over every probed version: its class, vLLM's route, experts,
    its fixtures, and the versions that ship it."""
    versions = [p["transformers"] for p in probes]
    rows: dict[str, dict[str, Any]] = {}
    for p in probes:
        for c in p["candidates"]:
            row = rows.setdefault(c["model_type"], {**c, "in": set()})
            row["in"].add(p["transformers"])
    lines = ["| model type | class | vLLM | MoE | fixture | " + " | ".join(versions) + " |",
             "|---|---|---|---|---|" + "---|" * len(versions)]
    for model_type, row in sorted(rows.items()):
        marks = " | ".join("✓" if v in row["in"] else "–" for v in versions)
        lines.append(f"| {model_type} | {row['architecture']} | {row['vllm']} | "
                     f"{'yes' if row['moe'] else ''} | "
                     f"{', '.join(fixtures.get(row['architecture'], [])) or '–'} | {marks} |")
    covered = sum(1 for r in rows.values() if r["architecture"] in fixtures)
    lines.append("")
    lines.append(f"{len(rows)} model types; {covered} with a fixture; "
                 f"{sum(r['vllm'] == BACKEND_ONLY for r in rows.values())} served only through "
                 f"the backend, {sum(r['vllm'] == FALLBACK for r in rows.values())} unknown to "
                 "vLLM's registry (the backend is its fallback); "
                 f"{sum(bool(r['moe']) for r in rows.values())} with experts")
    return lines


def cmd_coverage(args: argparse.Namespace) -> int:
    from conformance.run.versions import DEFAULT_VERSIONS

    requested = args.versions.split(",") if args.versions else list(DEFAULT_VERSIONS)
    probes = []
    for version in requested:
        try:
            probes.append(probe_version(version))
        except RuntimeError as error:
            return fail(str(error))
        print(f"[coverage] transformers {version}: {len(probes[-1]['candidates'])} "
              "generative multimodal model types", file=sys.stderr, flush=True)
    if args.json:
        json.dump(probes, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print("\n".join(table(probes, fixtures_by_architecture())))
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--versions", help="comma-separated transformers versions (default: "
                        "the default matrix's)")
    parser.add_argument("--json", action="store_true", help="every probe, as JSON")


__all__ = ["add_arguments", "cmd_coverage", "fixtures_by_architecture", "table"]
