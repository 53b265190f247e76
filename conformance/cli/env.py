"""`conformance versions`, `fixtures` and `exec`: transformers overlays and fixtures."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from conformance.cli.common import csv, fail
from conformance.core import vllm_facts, vllms
from conformance.core.vllms import DEFAULT_VLLM, release, unsupported
from conformance.paths import ROOT
from conformance.run import versions
from conformance.run.environments import ensure_env, from_folder, is_folder_spec, parse
from conformance.run.versions import FULL_VERSIONS, in_vllm_window
from fixtures.build import tree_digest
from fixtures.registry import available_recipes
from fixtures.variants import build_fixture, get_recipe  # get_recipe: a variant's name too
from impl.version import parse_version, placeholder_strategy

NEWEST = "newest"  # `exec --vllm newest`: the default axis's newest release

if TYPE_CHECKING:
    from fixtures.recipe import Recipe


def show_vllm_facts(write: bool, spec: str) -> int:
    """Each release's facts, probed in its environment where this machine has it (or, `spec`
    a folder: in the folder's vllm package, an unpacked wheel of a release whose environment
    cannot be built here, over its release's), else as recorded; `write` records the probed
    ones (keeping the others' records)."""
    folder = None
    if is_folder_spec(spec):
        try:
            folder = from_folder(spec)
        except ValueError as error:
            return fail(str(error))
    found = dict(vllm_facts.recorded())
    for version, rel in vllms.releases().items():
        python, source = rel.interpreter, None
        if folder is not None and vllms.release_of(folder.label) == version:
            python, source = Path(sys.executable), str(folder.source)
        probed = vllm_facts.facts(str(python), source) if python.exists() else None
        facts = probed or found.get(version)
        said = "probed" if probed else "recorded" if facts else "unknown: no environment here"
        if probed:
            found[version] = probed
        if facts is None:
            print(f"vLLM {version}: {said}")
            continue
        print(f"vLLM {version} ({facts.distribution} {facts.version}, {said}): transformers "
              f"{facts.transformers}; backend-only classes: {', '.join(facts.backend_classes)}")
    if write:
        vllm_facts.record(found)
        print(f"wrote {vllm_facts.RECORDED.relative_to(ROOT)}")
    return 0


def cmd_versions(args: argparse.Namespace) -> int:
    if args.action == "vllm-facts":
        return show_vllm_facts(args.write, args.vllm)
    if args.action == "newest-vllm":  # stdout: the release alone, what `--vllm` takes
        try:
            print(versions.index_releases("vllm")[-1])
        except (RuntimeError, IndexError) as error:
            return fail(f"no vLLM release on the package index: {error}")
        return 0
    vllm = release(args.vllm).version  # a one-line error for an unknown release
    if args.action == "newest":  # stdout: the version alone; stderr: each newer one skipped
        chosen = versions.requested_versions(args.versions, default=()) or \
            versions.index_releases()
        newest, skipped = versions.newest_installable(chosen, vllm)
        for version, cause in skipped:
            print(f"skipped transformers {version}: {cause}", file=sys.stderr)
        if newest is None:
            return fail(f"none of the {len(skipped)} newest releases installs over vLLM {vllm}'s "
                        "environment")
        print(newest)
        return 0
    if args.action == "lock":
        chosen = csv(args.versions) or FULL_VERSIONS
        # below a release's window a version is n/a there: nothing to pin for it
        runnable = tuple(v for v in chosen if not unsupported(vllm, v))
        print(f"wrote {versions.write_overlay_lock(runnable, vllm)}")
        return 0
    for version in versions.requested_versions(args.versions, default=FULL_VERSIONS):
        if args.action == "install":
            started = time.monotonic()
            overlay = versions.ensure_overlay(version, vllm=vllm)
            print(f"{version}: ready in {time.monotonic() - started:.1f} s at "
                  f"{overlay.path or 'the environment itself'}")
        else:
            window = (f"inside vLLM {vllm}'s window" if in_vllm_window(version, vllm)
                      else "below its window: n/a" if unsupported(vllm, version)
                      else f"beyond vLLM {vllm}'s pin")
            # 0.32.0 merged the Legacy processor into the Offsets one: one path from then on
            strategy = placeholder_strategy(version) if vllm == DEFAULT_VLLM else "offsets"
            print(f"{version}  {strategy:>7} path  {window}")
    return 0


def fixture_bounds(recipe: Recipe) -> list[dict]:
    """Where a fixture runs: per vLLM release, the transformers versions its cells run on.
    The recipe's own bounds (None: none) within the release's window, whose lower end is
    where the release stops working (below it a cell is n/a); above its pin versions are
    upgrade candidates, so they run: no upper end but the recipe's. Releases with the same
    bounds share a row."""
    rows: dict[tuple[str | None, str | None], list[str]] = {}
    for found in vllms.releases().values():
        lows = [v for v in (recipe.min_transformers, found.window[0]) if v]
        low = max(lows, key=parse_version) if lows else None
        rows.setdefault((low, recipe.max_transformers), []).append(found.version)
    return [{"vllm": vllms, "transformers_min": low, "transformers_max": high}
            for (low, high), vllms in rows.items()]


def bounds_text(row: dict) -> str:
    low, high = row["transformers_min"], row["transformers_max"]
    if low and high and parse_version(high) <= parse_version(low):
        span = "none"
    else:
        span = ",".join(([f">={low}"] if low else []) + ([f"<{high}"] if high else [])) or "any"
    return f"{span} on vLLM {', '.join(row['vllm'])}"


def cmd_fixtures(args: argparse.Namespace) -> int:
    names = csv(args.fixtures) or available_recipes()
    if args.action == "list":
        recipes = [get_recipe(name) for name in names]
        if args.json:
            print(json.dumps([{"name": r.name, "architecture": r.architecture,
                               "modalities": list(r.modalities), "takes_video": r.takes_video,
                               "mirrors": r.mirrors, "native_in_vllm": r.native_in_vllm,
                               "bounds": fixture_bounds(r), "version_reason": r.version_reason}
                              for r in recipes], indent=2))
            return 0
        for recipe in recipes:
            bounds = "; ".join(bounds_text(row) for row in fixture_bounds(recipe))
            print(f"{recipe.name:<16} {recipe.architecture:<40} "
                  f"{','.join(recipe.modalities):<12} mirrors {recipe.mirrors:<46} "
                  f"transformers {bounds}")
        return 0
    for name in names:
        started = time.monotonic()
        path = build_fixture(name, args.profile, force=args.force)
        seconds = time.monotonic() - started
        print(f"{name}: {path} ({seconds:.2f} s, sha256 {tree_digest(path)[:16]})")
    return 0


def cmd_exec(args: argparse.Namespace) -> int:
    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    if not command:
        return fail("nothing to run (conformance exec --transformers V -- COMMAND ...)")
    spec = vllms.default_axis()[-1] if args.vllm == NEWEST else args.vllm
    if not (args.transformers or spec):
        return fail("exec needs --transformers V, --vllm X or both")
    label = None
    if spec:
        try:
            under_test = parse(spec)
            ensure_env(under_test)
        except (RuntimeError, ValueError) as error:
            return fail(str(error))
        if under_test.python != Path(sys.executable):
            return fail(f"vLLM {spec} runs in {under_test.python}, not in this environment "
                        f"({sys.executable}): run that environment's conformance")
        label = under_test.label
    transformers = args.transformers or versions.window_top(label)
    overlay = versions.ensure_overlay(versions.requested_version(transformers))
    env = overlay.environ()
    if spec:
        env = under_test.environ(env)
    what = f"transformers {transformers}" + (f", vLLM {label}" if label else "")
    print(f"[conformance] {what}: {' '.join(command)}", flush=True)
    env["PATH"] = os.path.join(sys.prefix, "bin") + os.pathsep + env.get("PATH", "")
    os.execvpe(command[0], command, env)
