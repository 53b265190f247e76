"""The environment a vLLM under test runs its workers in, made ready before a run: a release's
own environment built on demand (by scripts/bootstrap.py, which owns the building), a given
environment checked to run the harness's workers, a folder's vllm checked to be the one they
import. Beside run/versions.py, which does the same for transformers overlays."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conformance.core.vllms import DEFAULT_VLLM, Environment, VllmUnderTest
from conformance.paths import ROOT


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
