"""`conformance coverage`: the generative multimodal architectures of each transformers version,
what vLLM's registry does with each, and which of them have a fixture or, if none, why
(`conformance/expectations/coverage.toml`). `--write` keeps the probes of the full matrix's versions
in `reports/coverage.json`, the table in docs/coverage.md and the README's architecture table."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

from conformance.cli.common import fail
from conformance.expectations import coverage as catalogue
from conformance.inputs.coverage import BACKEND_ONLY, FALLBACK, NATIVE
from conformance.paths import ROOT
from conformance.run import versions
from conformance.run.versions import FULL_VERSIONS
from fixtures.registry import recipes_by_architecture

TABLE_DOC = ROOT / "docs" / "coverage.md"
README = ROOT / "README.md"
README_BEGIN = "<!-- architectures: `conformance coverage --write` writes this table -->"
README_END = "<!-- architectures: end -->"


def probe_version(version: str) -> dict[str, Any]:
    """The probe, run in a process with `version`'s transformers (its overlay)."""
    env = versions.ensure_overlay(version).environ()
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")
    out = subprocess.run([sys.executable, "-m", "conformance.inputs.coverage"], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines() or ["no output"]
        raise RuntimeError(f"the coverage probe failed on transformers {version}: {lines[-1]}")
    return json.loads(out.stdout)


def fixtures_by_architecture() -> dict[str, list[str]]:
    # the catalogue is of the generative classes: a pooling fixture (LlavaModel,
    # Gemma3ForSequenceClassification) serves a model type through another runner
    found = {architecture: [r.name for r in recipes if not r.pooling]
             for architecture, recipes in recipes_by_architecture().items()}
    return {architecture: names for architecture, names in found.items() if names}


def table(probes: list[dict[str, Any]], fixtures: dict[str, list[str]],
          known: catalogue.Catalogue | None = None) -> list[str]:
    """One row per model type over every probed version: its class, vLLM's route, experts,
    its fixtures (or the catalogue's word for why none), and the versions that ship it."""
    known = known or catalogue.Catalogue(frozenset(), {})
    versions = [p["transformers"] for p in probes]
    rows = model_rows(probes)
    lines = ["| model type | class | vLLM | MoE | fixture | " + " | ".join(versions) + " |",
             "|---|---|---|---|---|" + "---|" * len(versions)]
    for model_type, row in sorted(rows.items()):
        marks = " | ".join("✓" if v in row["in"] else "–" for v in versions)
        lines.append(f"| {model_type} | {row['architecture']} | {row['vllm']} | "
                     f"{'yes' if row['moe'] else ''} | "
                     f"{fixture_cell(model_type, row['architecture'], fixtures, known)} | "
                     f"{marks} |")
    return [*lines, "", summary_line(rows, fixtures, known)]


def summary_line(rows: dict[str, dict[str, Any]], fixtures: dict[str, list[str]],
                 known: catalogue.Catalogue) -> str:
    """The counts under both tables: model types, with a fixture, planned, unservable, by
    vLLM's route, with experts."""
    covered = sum(1 for t, r in rows.items() if known.covers(t, r["architecture"], fixtures))
    return (f"{len(rows)} model types; {covered} with a fixture, "
            f"{sum(known.status(t) == catalogue.PLANNED for t in rows)} planned, "
            f"{sum(known.status(t) == catalogue.UNSERVABLE for t in rows)} unservable; "
            f"{sum(r['vllm'] == BACKEND_ONLY for r in rows.values())} served only through "
            f"the backend, {sum(r['vllm'] == FALLBACK for r in rows.values())} unknown to "
            "vLLM's registry (the backend is its fallback); "
            f"{sum(bool(r['moe']) for r in rows.values())} with experts")


def model_rows(probes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each model type's candidate (as the first version that ships it reports it) and the
    versions that ship it (`in`)."""
    rows: dict[str, dict[str, Any]] = {}
    for p in probes:
        for c in p["candidates"]:
            row = rows.setdefault(c["model_type"], {**c, "in": set()})
            row["in"].add(p["transformers"])
    return rows


def readme_table(probes: list[dict[str, Any]], fixtures: dict[str, list[str]],
                 known: catalogue.Catalogue) -> list[str]:
    """The README's architecture table, compact (the README has a size budget): per route of
    vLLM's registry, the model types with a fixture, each noted with its fixtures where they
    are named otherwise, experts and the oldest version of the matrix that ships it where that
    is not the oldest; then the counts `table` closes with (docs/coverage.md has every model
    type, a row each)."""
    versions = [p["transformers"] for p in probes]
    rows = model_rows(probes)
    by_route: dict[str, list[str]] = {}
    for model_type, row in sorted(rows.items()):
        names = known.covers(model_type, row["architecture"], fixtures)
        if not names:
            continue
        first = next(v for v in versions if v in row["in"])
        notes = ([f"fixture{'s' if len(names) > 1 else ''} {', '.join(names)}"]
                 if names != [model_type] else [])
        notes += ["MoE"] if row["moe"] else []
        notes += [f"from {first}"] if first != versions[0] else []
        by_route.setdefault(row["vllm"], []).append(
            model_type + (f" ({'; '.join(notes)})" if notes else ""))
    order = [NATIVE, BACKEND_ONLY, FALLBACK]
    lines = ["| vLLM | model types with a fixture (shipped from transformers "
             f"{versions[0] if versions else '?'} unless noted) |", "|---|---|"]
    for route in sorted(by_route, key=lambda r: order.index(r) if r in order else len(order)):
        lines.append(f"| {route} ({len(by_route[route])}) | {', '.join(by_route[route])} |")
    return [*lines, "", summary_line(rows, fixtures, known)]


def readme_with(text: str, lines: list[str]) -> str:
    """README.md with its architecture table (between the two markers) replaced by `lines`."""
    head, found, rest = text.partition(README_BEGIN)
    _, ended, tail = rest.partition(README_END)
    if not (found and ended):
        raise ValueError(f"README.md lacks the markers {README_BEGIN} ... {README_END}")
    return head + README_BEGIN + "\n" + "\n".join(lines) + "\n" + README_END + tail


def fixture_cell(model_type: str, architecture: str, fixtures: dict[str, list[str]],
                 known: catalogue.Catalogue) -> str:
    if names := known.covers(model_type, architecture, fixtures):
        return ", ".join(names)
    status = known.status(model_type)
    if status == catalogue.UNSERVABLE:
        return f"unservable: {known.unservable[model_type].reason}"
    if status == catalogue.PLANNED and model_type in known.attempted:
        return f"planned; attempt: {known.attempted[model_type]}"
    return status or "– (not in coverage.toml)"


def snapshot_text(probes: list[dict[str, Any]]) -> str:
    """The probes as JSON with one candidate per line, so that a new release's diff reads as
    the model types it adds or changes."""
    parts = []
    for p in probes:
        head = {k: v for k, v in p.items() if k != "candidates"}
        rows = ",\n".join("   " + json.dumps(c, sort_keys=True) for c in p["candidates"])
        parts.append(" " + json.dumps(head, sort_keys=True)[:-1]
                     + ', "candidates": [\n' + rows + "\n ]}")
    return "[\n" + ",\n".join(parts) + "\n]\n"


def table_doc(probes: list[dict[str, Any]], lines: list[str]) -> str:
    vllm = probes[0]["vllm"] if probes else "?"
    return ("# Coverage\n\n"
            "Generated by `conformance coverage --write` from `reports/coverage.json`: every "
            "generative multimodal model type of the full matrix's transformers versions, what "
            f"vLLM {vllm}'s registry does with it, and its fixture or why it has none "
            "(`conformance/expectations/coverage.toml`; how the probe works: "
            "[fixtures.md](fixtures.md#coverage-what-transformers-ships-that-we-do-not-test-yet)"
            ").\n\n" + "\n".join(lines) + "\n")


def cmd_coverage(args: argparse.Namespace) -> int:
    requested = args.versions.split(",") if args.versions else list(FULL_VERSIONS)
    if args.write and requested != list(FULL_VERSIONS):
        return fail("--write records the full matrix's probes: leave out --versions")
    if args.snapshot and args.versions:
        return fail("--snapshot reads the recorded probes of the full matrix's versions: "
                    "leave out --versions")
    try:
        known = catalogue.load()
    except ValueError as error:
        return fail(str(error))
    probes = catalogue.read_snapshot() if args.snapshot else []
    for version in [] if args.snapshot else requested:
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
    fixtures = fixtures_by_architecture()
    lines = table(probes, fixtures, known)
    print("\n".join(lines))
    if args.write:
        written = [TABLE_DOC]
        if not args.snapshot:
            catalogue.SNAPSHOT.write_text(snapshot_text(probes))
            written.insert(0, catalogue.SNAPSHOT)
        TABLE_DOC.write_text(table_doc(probes, lines))
        README.write_text(readme_with(README.read_text(), readme_table(probes, fixtures, known)))
        written.append(README)
        print("wrote " + " and ".join(str(path.relative_to(ROOT)) for path in written))
    gaps = catalogue.uncovered(probes, fixtures, known,
                               every_version=args.snapshot or not args.versions)
    for kind, entries in gaps.items():
        if entries:
            print(f"{kind} in coverage.toml ({len(entries)}): {', '.join(entries)}",
                  file=sys.stderr)
    return 1 if any(gaps.values()) else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--versions", help="comma-separated transformers versions (default: "
                        "the full matrix's, 5.12.1 too)")
    parser.add_argument("--json", action="store_true", help="every probe, as JSON")
    parser.add_argument("--snapshot", action="store_true", help="the recorded probes "
                        "(reports/coverage.json) instead of probing each version")
    parser.add_argument("--write", action="store_true", help="keep the full matrix's "
                        "probes in reports/coverage.json, the table in docs/coverage.md and the "
                        "README's architecture table")


__all__ = ["add_arguments", "cmd_coverage", "fixtures_by_architecture", "snapshot_text",
           "table"]
