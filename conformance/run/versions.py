"""Switch the transformers version of a run in seconds, without rebuilding the environment.

The environment (`.venv`) holds transformers 5.17.0. Any other version is an *overlay*: the
packages that differ for it (transformers, tokenizers, huggingface-hub) installed with
`uv pip install --target DIR --no-deps`, put first on `PYTHONPATH` of the process that runs the
cell. The packages each version needs are resolved against the environment's lock, pinned in
`env/transformers-overlays.lock` for the full matrix's versions, and resolved on the fly for others.

A run resolves every version it names before any cell (`resolve_up_front`): a version the
package index cannot give the environment is one line with the resolver's cause, not a column
of `error` cells. A requirement the user allows to stay unmet (`--allow-unmet DEP`) is removed
from the resolution, and the run says so in its results.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from conformance.core.vllm_facts import read_pins
from conformance.core.vllms import DEFAULT_VLLM, Release, facts_of, unsupported, where
from conformance.paths import ENV_DIR, cache_dir
from fixtures.cache import building
from impl.version import in_range, is_release, parse_version, placeholder_strategy

ENV_VERSION = "5.17.0"
"""The transformers version installed in the environment itself (vLLM 0.31.0's pin top)."""

FULL_VERSIONS: tuple[str, ...] = ("5.12.1", "5.14.1", "5.15.1", "5.17.0", "5.20.2", "5.22.2",
                                  "5.25.0")
"""The full matrix (`--versions full`, the nightly): two Legacy-path versions, two inside vLLM
0.31.0's window, vLLM 0.33.0's pin top (5.20.2), 0.34.0's (5.22.2) and the upgrade candidate
(the newest release the team has confirmed; 5.24.0 until 2026-12-03, its cells in git
history). Every vLLM under test runs every one of them (below a release's window a cell is
`n/a`)."""

DEFAULT_VERSIONS: tuple[str, ...] = FULL_VERSIONS[1:]
"""The main job's versions: the full matrix but 5.12.1, the oldest Legacy-path release (5.14.1
keeps the Legacy path, with audio, which 5.12.1 refuses). Within them each vLLM runs, of its own
window, the newest version of each placeholder path, and the candidate (`default_column`). Why
the main job drops what it drops, and what that costs: docs/performance.md."""

FULL = "full"
"""`--versions full`: every version of FULL_VERSIONS on every vLLM under test."""
REST = "rest"
"""`--versions rest`: the full matrix's cells the main job leaves out (with a main job's run,
the full matrix)."""

OVERLAY_PACKAGES = ("transformers", "tokenizers", "huggingface-hub")
OVERLAY_LOCK = ENV_DIR / "transformers-overlays.lock"


def requested_version(text: str) -> str:
    """A transformers release as a user writes it, checked by the project's version parser:
    MAJOR.MINOR.PATCH in its normal form (a pre-release such as 5.15.0rc1 too). `5.23` would
    install 5.23.0 and then not match the version its workers report; refused here, before
    anything is installed."""
    try:
        parsed = parse_version(text.strip())
    except ValueError:
        parsed = None
    if parsed is None or len(parsed.release) != 3 or parsed.epoch or parsed.local:
        raise ValueError(f"not a transformers release: {text.strip()!r} (a release is "
                         "MAJOR.MINOR.PATCH, e.g. 5.24.0)")
    if str(parsed) != text.strip():
        raise ValueError(f"not a transformers release as written: {text.strip()!r} (write "
                         f"{parsed})")
    return str(parsed)


def requested_versions(text: str | None, default: tuple[str, ...] = DEFAULT_VERSIONS
                       ) -> tuple[str, ...]:
    """A comma-separated `--versions` (empty: `default`; `full` and `rest`: FULL_VERSIONS, `rest`
    then keeping the cells `default_column` leaves out), each checked by `requested_version`."""
    if (text or "").strip() in (FULL, REST):
        return FULL_VERSIONS
    given = tuple(part for part in (text or "").split(",") if part.strip())
    return tuple(requested_version(part) for part in given) or default


def default_column(vllm: str, version: str, versions: tuple[str, ...] = DEFAULT_VERSIONS
                   ) -> bool:
    """Whether the main job runs `version` under the vLLM labelled `vllm`: one of `versions`
    (5.12.1 is not: only the full matrix runs it) that is the newest of them (the upgrade
    candidate, the gate's point) or, inside the release's own transformers window, the newest
    of its placeholder path there (the Legacy path's and the Offsets path's: what a deployment
    of that release runs on each path; vLLM 0.31.0: 5.14.1 and its pin top 5.17.0, 0.33.0: its
    pin top 5.20.2). The versions between them run in the full matrix (`--versions full`,
    `rest`). A vLLM whose window is unknown (a folder, another environment) runs every one of
    `versions`."""
    if version not in versions:
        return False
    facts = facts_of(vllm)
    if facts is None or version == max(versions, key=parse_version):
        return True
    if not in_range(version, *facts.window):
        return False
    path = placeholder_strategy(version)
    return version == max((v for v in versions if in_range(v, *facts.window)
                           and placeholder_strategy(v) == path), key=parse_version)


def runs_column(requested: str | None, vllm: str, version: str,
                versions: tuple[str, ...] = DEFAULT_VERSIONS) -> bool:
    """Whether a run given `--versions requested` runs `version` (one of `versions`, what
    `requested_versions` read) under `vllm`: the main job's columns (`default_column`) when none
    is given, the full matrix's others for `rest`, each one asked for otherwise."""
    if not (requested or "").strip():
        return default_column(vllm, version, versions)
    if requested.strip() == REST:
        return not default_column(vllm, version)
    return True


def in_vllm_window(version: str, vllm: str = DEFAULT_VLLM) -> bool:
    """Inside the transformers window the vLLM's metadata requires (unknown: inside)."""
    return in_range(version, *where(vllm).window)


def window_top(vllm: str | None = None, versions: tuple[str, ...] = DEFAULT_VERSIONS) -> str:
    """The newest of `versions` inside the vLLM's transformers window (default: the default
    release's): what a deployment of that release runs, the version its tests run on."""
    facts = facts_of(vllm or DEFAULT_VLLM)
    inside = [v for v in versions if facts is None or in_range(v, *facts.window)]
    if not inside:
        raise ValueError(f"none of {', '.join(versions)} is inside vLLM {vllm}'s window")
    return max(inside, key=parse_version)


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


def env_transformers(vllm: str = DEFAULT_VLLM) -> str:
    """The transformers version a vLLM's environment itself holds (a release's lock pin, a
    given environment's installed version)."""
    if vllm == DEFAULT_VLLM:
        return ENV_VERSION
    return where(vllm).pins()["transformers"]


def _uv() -> str:
    candidate = Path(sys.prefix) / "bin" / "uv"
    return str(candidate) if candidate.exists() else "uv"


class NotInstallable(RuntimeError):
    """A transformers version the package index cannot give a release's environment, with the
    resolver's cause in one line; `requirement` is the requirement that cannot be met, where
    the resolver names one (`kernels>=0.19.1,<0.20`), and `package` its name."""

    def __init__(self, version: str, vllm: str, cause: str, requirement: str = "") -> None:
        self.version, self.vllm, self.cause, self.requirement = version, vllm, cause, requirement
        self.package = _requirement_name(requirement) if requirement else ""
        where = "" if vllm == DEFAULT_VLLM else f" over vLLM {vllm}'s environment"
        super().__init__(f"transformers {version} cannot be installed{where}: {cause}")


def _requirement_name(requirement: str) -> str:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(requirement).name.lower().replace("_", "-")
    except InvalidRequirement:
        return ""


_NO_VERSION = re.compile(r"there is no version of (\S+?)[,.]? and")
# "only kernels<=0.17.2 is available and transformers>=5.25.0 depends on kernels>=0.19.1,<0.20,"
_LAGS = re.compile(r"only (\S+) (?:is|are) available and \S+ depends on (\S+?),? we can")
# "transformers==X depends on torch>=2.14 and you require torch==2.13.0,"
_PINNED = re.compile(r"\S+ depends on (\S+) and you require (\S+?),? we can")


def resolver_cause(stderr: str) -> tuple[str, str]:
    """uv's explanation of a failed resolution as (one line, the unmet requirement or "").
    uv words a proof over several lines; its first step names the requirement at fault."""
    text = " ".join(line.strip(" │╰─▶×") for line in stderr.splitlines())
    text = " ".join(text.replace("cause:", " ").split())
    if match := _NO_VERSION.search(text):
        return f"{match.group(1)} is not on the package index", ""
    if match := _LAGS.search(text):
        have, needs = match.groups()
        return f"it requires {needs} and the package index has only {have}", needs
    if match := _PINNED.search(text):
        needs, pinned = match.groups()
        return f"it requires {needs} and the environment pins {pinned}", needs
    because = re.search(r"Because (.+?\.)(?: And because|$)", text)
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    return (because.group(1) if because else (lines or ["the resolver gave no reason"])[-1]), ""


def resolve_pins(version: str, use_lock: bool = True, vllm: str = DEFAULT_VLLM,
                 without: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Packages (name==version) that transformers `version` needs beyond the environment of
    vLLM release `vllm` (resolved against its lock: its other pins may differ). `without`:
    packages whose requirements the resolution ignores (none of them is installed). Raises
    NotInstallable with the resolver's cause."""
    locked = _read_locked_overlays(vllm) if use_lock and not without else {}
    if version in locked:
        return locked[version]
    base = where(vllm).pins()
    constraints = [f"{n}=={v}" for n, v in base.items() if n not in OVERLAY_PACKAGES]
    with tempfile.TemporaryDirectory() as tmp:
        req, con, over = Path(tmp, "req.txt"), Path(tmp, "con.txt"), Path(tmp, "over.txt")
        req.write_text(f"transformers=={version}\n")
        con.write_text("\n".join(constraints) + "\n")
        # an override whose marker never holds removes the requirement from the resolution
        over.write_text("".join(f"{name} ; sys_platform == 'never'\n" for name in without))
        result = subprocess.run(
            [_uv(), "pip", "compile", str(req), "-c", str(con), "--override", str(over),
             "--python-version", "3.11", "--no-header", "--no-annotate", "--quiet"],
            capture_output=True, text=True, env={**os.environ, "UV_NATIVE_TLS": "1"},
        )
    if result.returncode != 0:
        raise NotInstallable(version, vllm, *resolver_cause(result.stderr))
    resolved = read_pins(result.stdout)
    return tuple(
        sorted(f"{n}=={v}" for n, v in resolved.items() if base.get(n) != v or n == "transformers")
    )


def overlay_lock(vllm: str = DEFAULT_VLLM) -> Path:
    home = where(vllm)
    if not isinstance(home, Release):
        raise ValueError(f"vLLM {vllm} is a given environment: only a release's overlays are "
                         "locked (a given environment's are resolved against what it holds)")
    return home.spec_dir / OVERLAY_LOCK.name


def _read_locked_overlays(vllm: str = DEFAULT_VLLM) -> dict[str, tuple[str, ...]]:
    if not isinstance(where(vllm), Release):
        return {}
    path = overlay_lock(vllm)
    if not path.exists():
        return {}
    table = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            version, _, pins = line.partition(":")
            table[version.strip()] = tuple(pins.split())
    return table


def write_overlay_lock(versions: tuple[str, ...] = FULL_VERSIONS,
                       vllm: str = DEFAULT_VLLM) -> Path:
    home = where(vllm)
    assert isinstance(home, Release), "only a release's overlays are locked"
    lock = home.lock().relative_to(ENV_DIR.parent)
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


def overlay_dir(version: str, vllm: str = DEFAULT_VLLM, without: tuple[str, ...] = ()) -> Path:
    # another release's overlays apart: resolved against its lock, their pins may differ
    folder = cache_dir() / "overlays"
    if vllm != DEFAULT_VLLM:
        folder = folder / f"vllm-{vllm.replace('@', '-')}"
    return folder / (f"transformers-{version}" + "".join(f"-without-{n}" for n in without))


@dataclass(frozen=True)
class Resolution:
    """How a run installs one transformers version over one release's environment."""

    version: str
    vllm: str
    pins: tuple[str, ...]
    without: tuple[str, ...] = ()  # packages left out (`--allow-unmet`)
    unmet: tuple[str, ...] = ()  # the requirements thereby not met, as transformers states them


# The resolutions this process decided up front: the overlays it installs later follow them
# (a version allowed to run without a requirement is installed without it, and only then).
_DECIDED: dict[tuple[str, str], Resolution] = {}

Resolver = Callable[..., tuple[str, ...]]  # resolve_pins(version, vllm=, without=)


@dataclass
class UpFront:
    """The outcome of resolving a run's versions before any cell: one line per version that
    cannot be installed, and the requirements each version allowed to run without lacks."""

    problems: list[str] = field(default_factory=list)
    resolutions: list[Resolution] = field(default_factory=list)

    def unmet(self) -> dict[str, list[str]]:
        """"5.25.0" (with its vLLM where not the default) -> the requirements it runs without:
        what results.json's meta and the reports say."""
        return {r.version + ("" if r.vllm == DEFAULT_VLLM else f" (vLLM {r.vllm})"):
                list(r.unmet) for r in self.resolutions if r.unmet}

    def meta(self) -> dict[str, dict[str, list[str]]]:
        return {"unmet_requirements": unmet} if (unmet := self.unmet()) else {}


def resolve_up_front(versions: Iterable[str], releases: Iterable[str],
                     allow_unmet: Collection[str] = (), resolver: Resolver | None = None,
                     log: Callable[[str], None] = print) -> UpFront:
    """Resolve every transformers version a run will install over every vLLM release it
    tests (below a release's window a version is n/a there: nothing to install), before any
    cell. A version whose only obstacles are requirements on packages in `allow_unmet` is
    resolved without them, said in one line, and recorded (`UpFront.unmet`)."""
    resolver = resolver or resolve_pins
    allowed = {_requirement_name(name) or name for name in allow_unmet}
    outcome, used = UpFront(), set()
    for vllm in dict.fromkeys(releases):
        for version in dict.fromkeys(versions):
            if version == env_transformers(vllm) or unsupported(vllm, version):
                continue
            without: tuple[str, ...] = ()
            unmet: tuple[str, ...] = ()
            while True:
                try:
                    pins = resolver(version, vllm=vllm, without=without)
                except NotInstallable as error:
                    if error.package in allowed and error.package not in without:
                        without, unmet = without + (error.package,), unmet + (error.requirement,)
                        continue
                    hint = (f" (to run it without that requirement: --allow-unmet "
                            f"{error.package}, docs/versions.md)" if error.package else "")
                    outcome.problems.append(f"{error}{hint}")
                    break
                resolution = Resolution(version, vllm, pins, without, unmet)
                outcome.resolutions.append(resolution)
                _DECIDED[(version, vllm)] = resolution
                used.update(without)
                if unmet:
                    log(f"transformers {version}: runs without {', '.join(unmet)} "
                        f"(--allow-unmet {','.join(without)}); its results say so")
                break
    if not outcome.problems and (idle := sorted(allowed - used)):
        log(f"--allow-unmet {','.join(idle)}: no requested version lacks it; nothing left out")
    return outcome


def ensure_overlay(version: str, log=print, vllm: str = DEFAULT_VLLM) -> Overlay:
    """Install (once) and return the overlay for `version` over vLLM release `vllm`'s env, as
    this process resolved it up front (`resolve_up_front`), else resolved now."""
    if version == env_transformers(vllm):
        return Overlay(version, (), None)
    decided = _DECIDED.get((version, vllm)) or Resolution(
        version, vllm, resolve_pins(version, vllm=vllm))
    target = overlay_dir(version, vllm, decided.without)
    with building(target):
        _install_overlay(version, decided.pins, target, log)
    return Overlay(version, decided.pins, target)


def index_releases(package: str = "transformers") -> list[str]:
    """Every stable release (MAJOR.MINOR.PATCH) of `package` on the package index, oldest
    first."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package],
                         capture_output=True, text=True)
    match = re.search(r"Available versions: (.*)", out.stdout)
    if out.returncode != 0 or match is None:
        raise RuntimeError(f"cannot list {package} releases from the package index: "
                           + (out.stderr.strip().splitlines() or ["no output"])[-1])
    found = (v.strip() for v in match.group(1).split(","))
    return sorted((v for v in found if is_release(v)), key=parse_version)


def newest_installable(releases: Iterable[str], vllm: str = DEFAULT_VLLM,
                       resolver: Resolver | None = None, tries: int = 8
                       ) -> tuple[str | None, list[tuple[str, str]]]:
    """The newest of `releases` that installs over vLLM release `vllm`'s environment, and
    each newer one skipped with its cause (at most `tries` tried: a gate of a release much
    older than the newest is no longer the weekly question)."""
    resolver = resolver or resolve_pins
    skipped: list[tuple[str, str]] = []
    for version in sorted(set(releases), key=parse_version, reverse=True)[:tries]:
        if version == env_transformers(vllm):
            return version, skipped
        try:
            resolver(version, vllm=vllm, without=())
        except NotInstallable as error:
            skipped.append((version, error.cause))
            continue
        return version, skipped
    return None, skipped


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
