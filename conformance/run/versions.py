"""Switch the transformers version of a run in seconds, without rebuilding the environment.

The environment (`.venv`) holds transformers 5.17.0. Any other version is an *overlay*: the
packages that differ for it (transformers, tokenizers, huggingface-hub) installed with
`uv pip install --target DIR --no-deps`, put first on `PYTHONPATH` of the process that runs the
cell. The packages each version needs are resolved against the environment's lock, pinned in
`env/transformers-overlays.lock` for the default versions, and resolved on the fly for others.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from conformance.core.vllms import DEFAULT_VLLM, RELEASES
from conformance.paths import ENV_DIR, cache_dir
from fixtures.cache import building
from impl.version import in_range

ENV_VERSION = "5.17.0"
"""The transformers version installed in the environment itself (vLLM 0.31.0's pin top)."""

DEFAULT_VERSIONS: tuple[str, ...] = ("5.12.1", "5.14.1", "5.15.1", "5.17.0", "5.20.2", "5.24.0")
"""The matrix: two Legacy-path versions, two inside vLLM's window, two upgrade candidates."""

VLLM_WINDOW = RELEASES[DEFAULT_VLLM].window
"""vLLM 0.31.0 requires transformers >=5.10.4,<5.18 (every release's: `vllms.RELEASES`)."""

OVERLAY_PACKAGES = ("transformers", "tokenizers", "huggingface-hub")
OVERLAY_LOCK = ENV_DIR / "transformers-overlays.lock"
_PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)")


def in_vllm_window(version: str, vllm: str = DEFAULT_VLLM) -> bool:
    return in_range(version, *RELEASES[vllm].window)


@dataclass(frozen=True)
class Overlay:
    version: str
    pins: tuple[str, ...]  # "name==version" for each package that differs from the env
    path: Path | None  # None: the environment's own version, nothing to overlay

    def environ(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for a subprocess that should import this transformers version."""
        env = dict(os.environ if base is None else base)
        # Another overlay already active (a run inside `conformance exec`) must not stay behind
        # this one: its packages would fill in whatever this version does not replace.
        overlays = str(cache_dir() / "overlays")
        kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                if p and not p.startswith(overlays)]
        paths = [str(self.path)] if self.path is not None else []
        if paths or kept:
            env["PYTHONPATH"] = os.pathsep.join(paths + kept)
        else:
            env.pop("PYTHONPATH", None)
        env["CONFORMANCE_TRANSFORMERS"] = self.version
        return env


def _env_lock(vllm: str = DEFAULT_VLLM) -> Path:
    return RELEASES[vllm].lock()


def env_transformers(vllm: str = DEFAULT_VLLM) -> str:
    """The transformers version a release's environment itself holds (its lock's pin)."""
    if vllm == DEFAULT_VLLM:
        return ENV_VERSION
    return _read_pins(_env_lock(vllm).read_text())["transformers"]


def _read_pins(text: str) -> dict[str, str]:
    pins = {}
    for line in text.splitlines():
        match = _PIN.match(line.strip())
        if match:
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def _uv() -> str:
    candidate = Path(sys.prefix) / "bin" / "uv"
    return str(candidate) if candidate.exists() else "uv"


def resolve_pins(version: str, use_lock: bool = True, vllm: str = DEFAULT_VLLM
                 ) -> tuple[str, ...]:
    """Packages (name==version) that transformers `version` needs beyond the environment of
    vLLM release `vllm` (resolved against its lock: its other pins may differ)."""
    locked = _read_locked_overlays(vllm) if use_lock else {}
    if version in locked:
        return locked[version]
    base = _read_pins(_env_lock(vllm).read_text())
    constraints = [f"{n}=={v}" for n, v in base.items() if n not in OVERLAY_PACKAGES]
    with tempfile.TemporaryDirectory() as tmp:
        req, con = Path(tmp, "req.txt"), Path(tmp, "con.txt")
        req.write_text(f"transformers=={version}\n")
        con.write_text("\n".join(constraints) + "\n")
        result = subprocess.run(
            [_uv(), "pip", "compile", str(req), "-c", str(con), "--python-version", "3.11",
             "--no-header", "--no-annotate", "--quiet"],
            capture_output=True, text=True, env={**os.environ, "UV_NATIVE_TLS": "1"},
        )
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"cannot resolve transformers=={version}: {tail[0]}")
    resolved = _read_pins(result.stdout)
    return tuple(
        sorted(f"{n}=={v}" for n, v in resolved.items() if base.get(n) != v or n == "transformers")
    )


def overlay_lock(vllm: str = DEFAULT_VLLM) -> Path:
    return RELEASES[vllm].spec_dir / OVERLAY_LOCK.name


def _read_locked_overlays(vllm: str = DEFAULT_VLLM) -> dict[str, tuple[str, ...]]:
    path = overlay_lock(vllm)
    if not path.exists():
        return {}
    table = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            version, _, pins = line.partition(":")
            table[version.strip()] = tuple(pins.split())
    return table


def write_overlay_lock(versions: tuple[str, ...] = DEFAULT_VERSIONS,
                       vllm: str = DEFAULT_VLLM) -> Path:
    lock = _env_lock(vllm).relative_to(ENV_DIR.parent)
    flag = "" if vllm == DEFAULT_VLLM else f" --vllm {vllm}"
    lines = [
        "# transformers version -> packages installed over the environment for it.",
        f"# Written by `conformance versions lock{flag}`; resolved against {lock}.",
    ]
    for version in versions:
        if version != env_transformers(vllm):
            lines.append(f"{version}: {' '.join(resolve_pins(version, False, vllm))}")
    path = overlay_lock(vllm)
    path.write_text("\n".join(lines) + "\n")
    return path


def overlay_dir(version: str, vllm: str = DEFAULT_VLLM) -> Path:
    # another release's overlays apart: resolved against its lock, their pins may differ
    folder = cache_dir() / "overlays"
    if vllm != DEFAULT_VLLM:
        folder = folder / f"vllm-{vllm}"
    return folder / f"transformers-{version}"


def ensure_overlay(version: str, log=print, vllm: str = DEFAULT_VLLM) -> Overlay:
    """Install (once) and return the overlay for `version` over vLLM release `vllm`'s env."""
    if version == env_transformers(vllm):
        return Overlay(version, (), None)
    pins = resolve_pins(version, vllm=vllm)
    target = overlay_dir(version, vllm)
    with building(target):
        _install_overlay(version, pins, target, log)
    return Overlay(version, pins, target)


# An overlay is installed without bytecode, where the environment has its own (bootstrap's
# INSTALL_RECIPE): compiling it would cost more per switch than it saves a worker's start
# (only transformers' imports come from the overlay), and a switch should stay under a
# second (docs/performance.md).
def _install_overlay(version: str, pins: tuple[str, ...], target: Path, log) -> None:
    marker = target / ".pins"
    if marker.exists() and marker.read_text().split() == list(pins):
        return
    log(f"installing transformers {version} overlay: {' '.join(pins)}")
    tmp = target.with_name(target.name + ".tmp")
    subprocess.run(["rm", "-rf", str(tmp)], check=True)
    result = subprocess.run(
        [_uv(), "pip", "install", "--quiet", "--no-deps", "--target", str(tmp), *pins],
        capture_output=True, text=True, env={**os.environ, "UV_NATIVE_TLS": "1"},
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"cannot install transformers {version} overlay: {result.stderr.strip()[-500:]}"
        )
    (tmp / ".pins").write_text(" ".join(pins) + "\n")
    subprocess.run(["rm", "-rf", str(target)], check=True)
    tmp.rename(target)


def installed_transformers() -> str:
    import transformers

    return transformers.__version__
