"""What a run fixes for every cell it runs, in one frozen object.

The runner (`conformance run`, `check`, `bisect`) builds it from its options and hands it to
each worker as the worker's first message (`run/worker.py`); a process that no runner started
(pytest, a worker run by hand) has the defaults, or what the environment names for it
(`from_environ`: the test suite's hypothesis profile, a fault a test plants). Code that needs
a setting reads `current()`, never the environment.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

# The environment a process no runner started may take its settings from.
ENVIRON = {"device": "CONFORMANCE_DEVICE", "dtype": "CONFORMANCE_DTYPE",
           "profile": "CONFORMANCE_HYPOTHESIS_PROFILE", "seed": "CONFORMANCE_SEED",
           "fault": "CONFORMANCE_FAULT", "vllm": "CONFORMANCE_VLLM"}


@dataclass(frozen=True)
class Settings:
    device: str = "cpu"
    dtype: str = "float32"
    profile: str = "dev"  # hypothesis profile: dev, ci, nightly (inputs/strategies.py)
    seed: int | None = None  # every search's seed; None: the profile's (run/suite.py)
    fault: str | None = None  # a fault planted on purpose: "name" or "name>=version"
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
