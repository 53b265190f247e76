"""The vLLM under test read from what a user gives (`--vllm`: a release or a folder holding a
vllm package; `--python`: an environment with vLLM), and the environment its workers run in,
made ready before a run: a release's own environment built on demand (by scripts/bootstrap.py,
which owns the building), a release with no build for this machine run from its wheel (fetched,
run/package_index.py; on a CPU with a CPU build's kernels grafted in, run/cpu_engine.py), a
given environment checked to run the harness's workers, a folder's vllm checked to be the one
they import. Beside run/versions.py, which does the same for transformers overlays; the naming
and describing are core/vllms.py's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conformance.core import catalogue, vllm_facts, vllms
from conformance.core.vllms import DEFAULT_VLLM, Environment, Release, VllmUnderTest, release
from conformance.paths import ROOT
from conformance.run import cpu_engine
from conformance.run.package_index import unpacked_wheel
from impl.version import parse_version


def is_folder_spec(spec: str) -> bool:
    return os.sep in spec or spec.startswith(".") or Path(spec).is_dir()


# `__version__ = version = 'X.Y.Z'`, as setuptools-scm / vcs-versioning write it
_VERSION_LINE = re.compile(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""",
                           re.MULTILINE)


def folder_version(folder: Path) -> str:
    """The version of the vllm package in `folder`: its `_version.py` (setuptools-scm writes
    it into a built checkout and a wheel), else a wheel's dist-info."""
    version_file = folder / "vllm" / "_version.py"
    if version_file.is_file() and (match := _VERSION_LINE.search(version_file.read_text())):
        return match.group(1)
    for metadata in sorted(folder.glob("vllm*.dist-info/METADATA")):
        for line in metadata.read_text(errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    raise ValueError(f"{folder}: no version for its vllm package (no vllm/_version.py, no "
                     "vllm*.dist-info): build the checkout once (pip install -e . writes it)")


def from_folder(spec: str) -> VllmUnderTest:
    folder = Path(spec).expanduser().resolve()
    if not (folder / "vllm" / "__init__.py").is_file():
        raise ValueError(f"{folder} holds no vllm package (no vllm/__init__.py): give a vLLM "
                         "source checkout or an unpacked wheel")
    version = parse_version(folder_version(folder))
    # a checkout of 0.32.x (a dev build, a patch) runs in the 0.32 release's environment
    same_minor = [r for r in vllms.releases().values() if r.buildable
                  and parse_version(r.version).release[:2] == version.release[:2]]
    label = f"{version}@{folder.name}"
    if same_minor:
        return VllmUnderTest(label, same_minor[-1], folder)
    return VllmUnderTest(label, fitting_release(folder, version), folder)


# what a worker imports of a vLLM before any cell: the backend and vLLM's compiled extension
_IMPORTS = ("import vllm, vllm.model_executor.models.transformers.multimodal, "
            "vllm.model_executor.models.registry")


def fitting_release(folder: Path, version, prefer: str | None = None) -> Release:
    """For a folder of a version no release here matches (a checkout of main, a newer wheel,
    a CUDA-only release's wheel on a CPU machine): the release environment `prefer` names, else
    the newest on this machine, in which its vllm imports (its Python over that environment's
    torch and compiled parts); else a one-line error with what each lacks."""
    lacks = []
    order = sorted(vllms.releases().values(), reverse=True,
                   key=lambda r: (r.version == prefer, parse_version(r.version)))
    for found in order:
        if not found.interpreter.exists():
            continue
        done = subprocess.run([str(found.interpreter), "-c", _IMPORTS], capture_output=True,
                              text=True, env=vllm_facts.own_environ(str(folder)))
        if done.returncode == 0:
            return found
        lacks.append(f"over {found.version}'s: "
                     f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    raise ValueError(f"{folder} holds vLLM {version}, which no environment here can import ("
                     + ("; ".join(lacks) or "no release environment is built") + ")")


def from_python(path: str | Path) -> VllmUnderTest:
    """The vLLM of the environment whose interpreter is `path` (not resolved through links: a
    venv's `bin/python` links to the base interpreter)."""
    python = Path(path).expanduser().absolute()
    if not python.is_file() or not os.access(python, os.X_OK):
        raise ValueError(f"{python} is not an interpreter (give an environment's bin/python)")
    home = Environment(python)
    vllms.register(home)
    return VllmUnderTest(home.key, home)


def parse(spec: str) -> VllmUnderTest:
    """A release (`X.Y.Z`) or a folder path: the one-line error says which is wrong."""
    spec = spec.strip()
    if is_folder_spec(spec):
        return from_folder(spec)
    found = release(spec)
    if found.buildable:
        return VllmUnderTest(spec, found)
    # a release with no build for this machine (a CUDA-only one): its wheel's Python over
    # the default release's environment where it imports there (the same cells on every
    # machine, whichever other environments it has built), else the newest it imports in; its
    # engine cannot start here (its model cells say so)
    wheel = unpacked_wheel(found.version)
    home = fitting_release(wheel, found.version, prefer=DEFAULT_VLLM)
    if "cpu" in found.builds or flavor() != "cpu":
        return VllmUnderTest(spec, home, wheel)
    # a CPU machine: the newest CPU build's kernels under the release's Python, so that its
    # engine starts and its model cells run (docs/versions.md#testing-another-vllm)
    kernels_version, kernels = cpu_engine.cpu_kernels()
    needs = catalogue.topup(found.version)
    topup = (cpu_engine.topup_library(found.version, needs, home.interpreter)
             if needs is not None else None)
    return VllmUnderTest(spec, home, cpu_engine.grafted(wheel, kernels, kernels_version, topup),
                         kernels_version)


def flavor() -> str:
    """`gpu` where the environments are CUDA builds (as scripts/bootstrap.py decides)."""
    chosen = os.environ.get("CONFORMANCE_FLAVOR")
    return chosen or ("gpu" if shutil.which("nvidia-smi") else "cpu")


def default() -> list[VllmUnderTest]:
    """What a run tests when given no vLLM: the default axis (`vllms.default_axis`), or, where the
    harness is installed beside another vLLM (vLLM's own CI environment), that one alone."""
    found = vllms.installed_version()
    if found is not None and found != DEFAULT_VLLM:
        return [from_python(sys.executable)]
    chosen = []
    for version in vllms.default_axis():
        try:
            chosen.append(parse(version))
        except (RuntimeError, ValueError) as error:
            raise ValueError(f"{error} (vLLM {version} is in the default vLLM axis; "
                             f"--vllm {DEFAULT_VLLM} tests the default release alone)") from None
    return chosen


def parse_many(specs: tuple[str, ...], pythons: tuple[str, ...] = ()) -> dict[str, VllmUnderTest]:
    """Labels -> what they test, in the order given: releases and folders, then environments
    by their interpreter (none of either: `default()`)."""
    chosen = [parse(s) for s in specs] + [from_python(p) for p in pythons] or default()
    return {v.label: v for v in chosen}


def ensure_env(under_test: VllmUnderTest, log=print) -> Path:
    """The release's environment, built on demand (by scripts/bootstrap.py) and checked: a
    folder's vllm must be the one its workers import."""
    python = under_test.python
    found = under_test.home
    if isinstance(found, Environment):
        check_harness_imports(under_test)
    elif found.version != DEFAULT_VLLM:
        stamp = found.venv / ".conformance-env"
        if not (python.exists() and stamp.exists()):
            log(f"building the environment of vLLM {found.version} ({found.venv})")
        result = subprocess.run([sys.executable, str(ROOT / "scripts" / "bootstrap.py"), "env",
                                 "--vllm", found.version], capture_output=True, text=True)
        if result.returncode != 0:
            tail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:]
            raise RuntimeError(f"vLLM {found.version}'s environment: "
                               f"{(tail or ['no output'])[0].removeprefix('[bootstrap] error: ')}")
    if under_test.source is not None:
        env = under_test.environ(dict(os.environ))
        origin = subprocess.run(
            [str(python), "-c", "import importlib.util; print(importlib.util.find_spec('vllm')"
             ".origin)"], capture_output=True, text=True, env=env).stdout.strip()
        if not origin.startswith(str(under_test.source)):
            raise RuntimeError(f"{under_test.source}'s vllm is not the one imported (got "
                               f"{origin or 'none'}): is PYTHONPATH set in a way that wins?")
    return python


def check_harness_imports(under_test: VllmUnderTest) -> None:
    """A given environment runs the workers: the harness's modules and what they need must
    import there (this checkout's modules are on its path; their dependencies are not)."""
    env = under_test.environ(dict(os.environ))
    done = subprocess.run([str(under_test.python), "-c", "import conformance.run.worker"],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the environment of {under_test.python} cannot run the harness's "
                           f"workers ({tail}): pip install this project there "
                           f"(`{under_test.python} -m pip install -e {ROOT}`)")
