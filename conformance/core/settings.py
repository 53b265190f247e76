"""What a run fixes for every cell it runs, in one frozen object.

The runner (`conformance run`, `check`, `bisect`) builds it from its options and hands it to
each worker as the worker's first message (`run/worker.py`); a process that no runner started
(pytest, a worker run by hand) has the defaults, or what the environment names for it
(`from_environ`: the test suite's hypothesis profile). Code that needs
a setting reads `current()`, never the environment.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

# The environment a process no runner started may take its settings from.
ENVIRON = {"device": "CONFORMANCE_DEVICE", "dtype": "CONFORMANCE_DTYPE",
           "profile": "CONFORMANCE_HYPOTHESIS_PROFILE", "seed": "CONFORMANCE_SEED",
           "vllm": "CONFORMANCE_VLLM"}

# Variables the harness read once, and what replaced each: said, never silently ignored
REMOVED = {
    "CONFORMANCE_FAULT": "--fault (conformance run, check and bisect; a fault parsed once "
                         "travels with each cell)",
}


# Every other variable the harness reads, by what reads it: a CONFORMANCE_* name outside these
# is a typo or a setting that no longer exists, which a command says instead of ignoring it.
OTHER_VARIABLES = {
    "CONFORMANCE_VENV": "where scripts/bootstrap.py builds the environment",
    "CONFORMANCE_FLAVOR": "cpu or gpu environments (scripts/bootstrap.py)",
    "CONFORMANCE_CACHE": "the fixture and overlay cache (fixtures/cache.py)",
    "CONFORMANCE_CPU_ISA": "run as a CPU with at most this instruction set (subjects/kernels.py)",
    "CONFORMANCE_CPUS": "a worker's CPU share, set by the runner (run/matrix.py)",
    "CONFORMANCE_TRANSFORMERS": "a transformers overlay's version, set by the runner",
    "CONFORMANCE_HEAP_FREEZE": "0: workers do not freeze their heap (core/heap.py)",
    "CONFORMANCE_SLOW_EXIT": "pytest processes tear vLLM down on exit (tests/conftest.py)",
}


def unknown_variables(environ: dict[str, str] | None = None) -> list[str]:
    """The CONFORMANCE_* variables set in `environ` that nothing of the harness reads."""
    environ = dict(os.environ if environ is None else environ)
    known = {*ENVIRON.values(), *OTHER_VARIABLES, *REMOVED}
    return sorted(n for n in environ if n.startswith("CONFORMANCE_") and n not in known)


def removed_variables(environ: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(variable, what replaced it) for each variable set that the harness no longer reads."""
    environ = dict(os.environ if environ is None else environ)
    return [(name, instead) for name, instead in REMOVED.items() if environ.get(name)]


# The commands that fix every setting from their options (`use`): there the variables of
# ENVIRON are not read
RUNNERS = ("run", "check", "bisect")


# The test suite's profile, which CI sets for the whole job (.ci/run) so that its pytest
# processes draw the same cases: a runner in that job has its own --profile, and says nothing
RUNNER_QUIET = frozenset({"CONFORMANCE_HYPOTHESIS_PROFILE"})


def ignored_by_runner(environ: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(variable, the option a runner takes instead) for each ENVIRON variable set."""
    environ = dict(os.environ if environ is None else environ)
    return [(var, f"--{name}") for name, var in ENVIRON.items()
            if environ.get(var) and var not in RUNNER_QUIET]


@dataclass(frozen=True)
class Settings:
    device: str = "cpu"
    dtype: str = "float32"
    profile: str = "dev"  # hypothesis profile: dev, ci, nightly (inputs/strategies.py)
    seed: int | None = None  # every search's seed; None: the profile's (run/suite.py)
    vllm: str | None = None  # the label of the vLLM this process runs; None: the installed one

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Settings:
        known = {f.name for f in fields(cls)}
        if unknown := sorted(set(data) - known):
            raise ValueError(f"unknown settings {', '.join(unknown)} (known: {sorted(known)})")
        return cls(**data)

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> Settings:
        environ = os.environ if environ is None else environ
        given: dict[str, Any] = {name: environ[var] for name, var in ENVIRON.items()
                                 if environ.get(var)}
        if "seed" in given:
            given["seed"] = int(given["seed"])
        return cls(**given)

    def but(self, **changes: Any) -> Settings:
        return replace(self, **changes)


_current: list[Settings] = []


def current() -> Settings:
    """This process's settings: those its runner gave it, else the environment's."""
    if not _current:
        _current.append(Settings.from_environ())
    return _current[0]


def use(settings: Settings) -> None:
    """Make `settings` this process's (a worker, on its runner's first message; a command
    that runs its cells in-process)."""
    _current[:] = [settings]
