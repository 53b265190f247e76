"""The process that runs cells on one transformers version and streams their verdicts.

Started by the matrix runner with the version's overlay on PYTHONPATH, the cells given as JSON
on stdin. Before each cell it prints START with the cell's key, after it VERDICT with the
verdict, each on a line of its own, so vLLM's and transformers' output can share stdout and the
runner knows which cell a crash or hang belongs to.
"""

from __future__ import annotations

import json
import sys

MARK = "@@verdict@@ "
START = "@@start@@ "


def emit(mark: str, payload: str) -> None:
    # Progress bars leave lines open: start ours on a fresh one.
    sys.stdout.write("\n" + mark + payload + "\n")
    sys.stdout.flush()


def keys_from_args(argv: list[str]) -> list:
    """`--fixtures a,b --checks c,d [--subjects s]`: by hand, on the installed version."""
    import argparse

    import transformers

    from conformance.run.plan import expand_cells

    parser = argparse.ArgumentParser(prog="python -m conformance.run.worker")
    parser.add_argument("--fixtures", required=True)
    parser.add_argument("--checks", required=True)
    parser.add_argument("--subjects", default="impl,vllm-backend")
    args = parser.parse_args(argv)
    return expand_cells(args.fixtures.split(","), (transformers.__version__,),
                        args.subjects.split(","), args.checks.split(","))


def build_all(fixtures: set[str]) -> None:
    """Build every fixture first: once vLLM's backend has loaded a model, transformers' model
    classes are patched for the whole process and building a checkpoint fails. The paths are
    kept for the worker's life, so a recipe edited meanwhile is not rebuilt mid-run."""
    from conformance.subjects.context import fixture_path
    from fixtures.registry import get_recipe

    for name in sorted(fixtures):
        try:
            get_recipe(name)
            fixture_path(name)
        except Exception:  # the cell itself reports it
            continue


def pin_to_share() -> None:
    """Run on the CPUs the matrix runner gave this worker (`CONFORMANCE_CPUS`), before torch
    sizes its thread pools from them."""
    import os

    if cpus := os.environ.get("CONFORMANCE_CPUS"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


def main(argv: list[str]) -> int:
    pin_to_share()
    from conformance.results.verdict import CellKey
    from conformance.run.cell import run_cell

    raw_keys = keys_from_args(argv) if argv else json.load(sys.stdin)
    build_all({raw[0] for raw in raw_keys})
    for raw in raw_keys:
        key = CellKey(*raw)
        emit(START, json.dumps(list(key)))
        emit(MARK, run_cell(key).to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
