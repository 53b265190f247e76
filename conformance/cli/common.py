"""What every command shares: defaults, argument parsing helpers, the one-line error, and the
check that the code running is the checkout's the command was run in."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from conformance.core.subjects import SUBJECTS, VLLM_BACKEND
from conformance.paths import REPORTS_DIR, ROOT

BASELINE = REPORTS_DIR / "baseline.json"
DEFAULT_SUBJECTS = SUBJECTS  # what `check` runs on one checkpoint, and what a run may name
# What `run` checks by default: the backend alone. The matrix is the gate's verdict on the backend
# over every transformers version and vLLM; `impl` (our reference of the backend, following the
# release profile of the vLLM under test: impl/release.py) is checked against it by the test
# command on every fixture (tests/impl/test_equivalence_vllm.py: on 0.31.0 with the environment's
# transformers and the Legacy path, on the default axis's newest release with its window's
# newest transformers) and joins a run by name (`--subjects impl,vllm-backend`, the nightly's).
# Both subjects over 37 fixtures, six transformers versions and two vLLMs took 24.6 min on two
# cores, past the main job's 20 (docs/performance.md).
RUN_SUBJECTS = (VLLM_BACKEND,)


def csv(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


def fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


PROJECT = "vllm-mm-conformance"  # pyproject.toml's project name


def checkout_of(folder: Path) -> Path | None:
    """The root of the checkout of this project that `folder` lies in (a pyproject.toml naming
    the project, beside a `conformance` package), or None."""
    for candidate in (folder, *folder.parents):
        if not (candidate / "conformance" / "__init__.py").is_file():
            continue
        try:
            project = tomllib.loads((candidate / "pyproject.toml").read_text())["project"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if project.get("name") == PROJECT:
            return candidate
    return None


def not_a_checkout(code: Path = ROOT) -> str | None:
    """Why this install cannot run: the harness works from its checkout (its findings, the
    baseline, the environment specs are files beside the code), which a wheel install into
    site-packages leaves behind. None: it runs from a checkout."""
    if (code / "conformance" / "expectations" / "findings.toml").exists():
        return None
    return (f"this install of the harness ({code}) has no checkout beside it (no findings.toml, "
            "no reports/): install it editable from a checkout, `pip install -e CHECKOUT`")


def other_checkout(cwd: Path | None = None, code: Path = ROOT) -> str | None:
    """Why this process must not run here: it runs the code of one checkout (`code`) from
    inside another. An environment shared by two checkouts (CONFORMANCE_VENV, a linked .venv)
    has the checkout it was installed from on its path, and its console script would run that
    one's code and write into its reports/. None: the two agree, or the command runs outside
    any checkout."""
    try:
        here = checkout_of(cwd or Path.cwd())
    except OSError:  # the working folder was removed
        return None
    if here is None or here.resolve() == code.resolve():
        return None
    return (f"this environment runs the code of the checkout {code}, not of this one ({here}): "
            "build this checkout's own (`python3 scripts/bootstrap.py env` without "
            f"CONFORMANCE_VENV or a linked .venv), or run `python -m conformance` in {here}")
