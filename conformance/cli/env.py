"""`conformance versions`, `fixtures` and `exec`: transformers overlays and fixtures."""

from __future__ import annotations

import argparse
import os
import sys
import time

from conformance.cli.common import csv, fail
from conformance.run.versions import DEFAULT_VERSIONS, in_vllm_window


def cmd_versions(args: argparse.Namespace) -> int:
    from conformance.core.vllms import DEFAULT_VLLM, release, unsupported
    from conformance.run import versions
    from impl.version import placeholder_strategy

    vllm = release(args.vllm).version  # a one-line error for an unknown release
    if args.action == "lock":
        chosen = csv(args.versions) or DEFAULT_VERSIONS
        # below a release's window a version is n/a there: nothing to pin for it
        runnable = tuple(v for v in chosen if not unsupported(vllm, v))
        print(f"wrote {versions.write_overlay_lock(runnable, vllm)}")
        return 0
    for version in csv(args.versions) or DEFAULT_VERSIONS:
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


def cmd_fixtures(args: argparse.Namespace) -> int:
    from fixtures.registry import available_recipes, get_recipe

    names = csv(args.fixtures) or available_recipes()
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


def cmd_exec(args: argparse.Namespace) -> int:
    from conformance.run import versions

    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    if not command:
        return fail("nothing to run (conformance exec --transformers V -- COMMAND ...)")
    overlay = versions.ensure_overlay(args.transformers)
    print(f"[conformance] transformers {args.transformers}: {' '.join(command)}", flush=True)
    env = overlay.environ()
    env["PATH"] = os.path.join(sys.prefix, "bin") + os.pathsep + env.get("PATH", "")
    os.execvpe(command[0], command, env)
