"""The process that runs cells on one transformers version and streams their verdicts.

Started by the runner (`workers.py`) with the version's overlay on PYTHONPATH; its messages
come as JSON on stdin: the run's settings (and its folder, where the reproducers go), then the
cells. Before each cell it prints START with the cell's key, after it VERDICT with the verdict,
each on a line of its own, so vLLM's and transformers' output can share stdout and the runner
knows which cell a crash or hang (and every line printed) belongs to.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from hypothesis import settings as profiles

from conformance.checks import registry
from conformance.core import heap
from conformance.core.settings import Settings, use
from conformance.results.portable import folder_cell
from conformance.run import cell as runner
from conformance.run.plan import Cell, expand_cells
from conformance.run.versions import installed_transformers
from conformance.run.workers import MARK, START
from conformance.subjects.context import fixture_path
from conformance.subjects.kernels import cap_from_environ
from fixtures.variants import get_recipe

__all__ = ["MARK", "START", "main"]  # the protocol's marks: the runner's (`workers.py`)


def emit(mark: str, payload: str) -> None:
    # Progress bars leave lines open: start ours on a fresh one.
    sys.stdout.write("\n" + mark + payload + "\n")
    sys.stdout.flush()


def cells_from_args(argv: list[str]) -> list[Cell]:
    """`--fixtures a,b --checks c,d [--subjects s]`: by hand, on the installed version."""
    parser = argparse.ArgumentParser(prog="python -m conformance.run.worker")
    parser.add_argument("--fixtures", required=True)
    parser.add_argument("--checks", required=True)
    parser.add_argument("--subjects", default="impl,vllm-backend")
    args = parser.parse_args(argv)
    return [Cell(key) for key in expand_cells(args.fixtures.split(","),
                                              (installed_transformers(),),
                                              args.subjects.split(","), args.checks.split(","))]


def build_all(fixtures: set[str]) -> None:
    """Build every fixture first: once vLLM's backend has loaded a model, transformers' model
    classes are patched for the whole process and building a checkpoint fails. The paths are
    kept for the worker's life, so a recipe edited meanwhile is not rebuilt mid-run."""
    for name in sorted(fixtures):
        try:
            get_recipe(name)
            fixture_path(name)
        except Exception:  # the cell itself reports it
            continue


def pin_to_share() -> None:
    """Run on the CPUs the matrix runner gave this worker (`CONFORMANCE_CPUS`), before torch
    sizes its thread pools from them (nothing this module imports loads torch)."""
    if cpus := os.environ.get("CONFORMANCE_CPUS"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


# What nearly every cell imports beside the cell runner (imported with this module): done
# before the first cell, so that no cell's time carries it. A cell's seconds are what the
# runner balances workers by (`matrix.fixture_costs`); otherwise the import time lands on
# whichever fixture a worker runs first.
WARM_UP = ("transformers", "vllm.entrypoints.llm", "vllm.model_executor.models.transformers",
           # the engine's model runner (the CPU one builds on the GPU one), which the
           # first engine of a worker would otherwise pay for
           "vllm.v1.worker.gpu_worker", "vllm.v1.worker.cpu_worker")


def compile_sampler() -> None:
    """vLLM's sampler ranks logprobs with a `torch.compile`d function, compiled on its first
    call in a process and once more, with dynamic shapes, on the next vocab size: otherwise
    the first engine cell with logprobs of every worker pays for it. Two calls with two
    vocab sizes leave the dynamic graph every later call uses."""
    import torch
    from vllm.v1.sample.sampler import Sampler

    for vocab in (16, 17):
        for rows in (1, 3):
            logprobs = torch.randn(rows, vocab).log_softmax(-1)
            Sampler.gather_logprobs(logprobs, 2, torch.zeros(rows, dtype=torch.long))


def loads_an_engine(cells: list[Cell]) -> bool:
    """Whether any of these cells starts an engine (a model check): only then is the sampler
    worth compiling up front."""
    checks = registry()  # an unknown check is its cell's error, not the warm-up's
    return any(checks[c.key.check].loads_model for c in cells if c.key.check in checks)


def warm_up(engine: bool) -> None:
    started = time.monotonic()
    # what it imports lives as long as the worker: frozen (core/heap.py)
    with heap.settled_after():
        for module in WARM_UP:
            try:
                importlib.import_module(module)
            except Exception as error:  # the cells that need it report it
                print(f"warm-up: cannot import {module}: {error}", flush=True)
    try:
        if engine:
            compile_sampler()
    except Exception as error:  # another vLLM's sampler: its first cell pays instead
        print(f"warm-up: sampler not compiled: {error}", flush=True)
    print(f"warm-up: {time.monotonic() - started:.1f} s", flush=True)


def take(settings: dict) -> None:
    """The run's settings, for every cell of this process (its hypothesis profile too:
    `inputs/strategies.py`, which the cell runner imports, loaded this process's default when
    it was imported)."""
    given = Settings.from_json(settings)
    use(given)
    profiles.load_profile(given.profile)


def main(argv: list[str]) -> int:
    pin_to_share()
    cap_from_environ()  # before torch's import sizes its kernels and vLLM picks its own
    ready = False
    fixture = None  # the fixture of the cell before
    repro_dir = None  # the run folder's repro/ (a worker run by hand: run_suite's default)
    for message in ([cells_from_args(argv)] if argv else cells_of(messages(sys.stdin))):
        if isinstance(message, dict) and "settings" in message:
            take(message["settings"])
            if message.get("folder"):
                # absolute: the verdict records it relative to the folder, whatever the cwd
                repro_dir = Path(message["folder"]).resolve() / "repro"
            continue
        if isinstance(message, dict):  # every fixture it may be given, before any model loads
            build_all(set(message["build"]))
            continue
        if not ready:
            build_all({cell.key.fixture for cell in message})
            warm_up(engine=loads_an_engine(message))
            ready = True
        for cell in message:
            key = cell.key
            if key.fixture != fixture:
                # the fixture before leaves its models and engines cached for the worker's
                # life: the cycle collector need not scan them again (core/heap.py)
                heap.settle()
                fixture = key.fixture
            emit(START, json.dumps(list(key)))
            verdict = runner.run_cell(cell, repro_dir=repro_dir)
            if repro_dir is not None:  # its log is an artifact too: paths relative to the folder
                verdict = folder_cell(verdict, repro_dir.parent)
            emit(MARK, verdict.to_json())
    return 0


def cells_of(stream: Iterator[Any]) -> Iterator[Any]:
    """The runner's messages, each list of cells read as `Cell`s (their work descriptions:
    `Cell.to_json`)."""
    for message in stream:
        yield [Cell.from_json(raw) for raw in message] if isinstance(message, list) else message


def messages(stream: TextIO) -> Iterator[Any]:
    """The runner's lines, each read as it comes: a list of cells, or {"build": fixtures}
    (`workers.run_worker`). Whatever the runner writes in one piece (its cells as one JSON
    document, without a newline) is read whole."""
    buffer = ""
    for line in stream:
        buffer += line
        try:
            message = json.loads(buffer)
        except json.JSONDecodeError:
            continue  # a document spread over lines: read on
        buffer = ""
        yield message
    if buffer.strip():
        yield json.loads(buffer)


def leave(code: int) -> None:
    """End the process without its interpreter teardown. Every verdict is out and flushed, and
    nothing of a worker outlives it; tearing down the engines and models it kept (one or two
    per fixture) takes seconds per fixture, in which the matrix would wait for a worker that
    has finished."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main(sys.argv[1:]))
