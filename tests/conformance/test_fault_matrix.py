"""No known finding swallows a planted fault: each check's matrix fault (`Check.matrix_fault`,
a fault of vLLM's backend itself) turns every `vllm-backend` cell of that check that carries a
finding in the baseline into `fail`, on one Legacy and one Offsets transformers version, over
the whole matrix (not a sample).

A finding explains one difference; a fault that adds another must surface whatever the cell
already shows. The only cells exempt are those where the subject never gets as far as the
faulted step: all the baseline saw is the subject raising (its processor cannot be created,
or it raised on every case), and the faulty run sees just that again (`never_reaches`).
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from conformance.checks import registry
from conformance.core.signatures import signature
from conformance.results.verdict import Verdict
from conformance.subjects.faults import kind

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "reports" / "baseline.json"
VERSIONS = ("5.12.1", "5.17.0")  # the Legacy path, the Offsets path
VLLM = "0.31.0"


def finding_cells() -> list[dict]:
    """The baseline's `vllm-backend` cells on VERSIONS that a finding explains."""
    cells = json.loads(BASELINE.read_text())["cells"]
    return [c for c in cells if c["subject"] == "vllm-backend" and c["status"] == "xfail"
            and c["version"] in VERSIONS and c["vllm"] == VLLM]


RAISED = re.compile(r"\b[A-Z]\w*(Error|Exception)\b")


# Cells where the matrix fault's step does not occur at all, each with why (reviewable data):
# the backend raises nothing there for `backend-errors-swallowed` to swallow.
UNREACHED = {
    ("paligemma", "5.12.1", "errors"):
        "PaliGemma prompts hold no image token: on the Legacy path the backend accepts every "
        "unplaceable variant (as native vLLM does) and raises nothing, so no error can be "
        "swallowed; what it accepts is compared with native's "
        "(paligemma-legacy-range-without-bos)",
    ("hunyuan_vl", "5.17.0", "encoder"):
        "on CPU the backend raises in HunYuanVL's vision merger before any encoder row exists "
        "to split (hunyuan-vl-cpu-merger-not-contiguous), so `backend-row-shifted` has nothing "
        "to shift; the cell's other differences are impl's against the HF model "
        "(hunyuan-vl-features-split-by-patches), which the fault does not touch",
}


def never_reaches(before: dict, after: dict) -> bool:
    """Whether the subject of this cell never reaches a step a fault could change: everything
    the baseline observed is the subject raising (its processor or model cannot be set up,
    or it raised on every input), and the faulty run observed that again, up to its measured
    values (a dummy image of another size raising the same error) and what a message lists
    after it says what failed (vLLM's list of a model's parameters, in no fixed order)."""
    was = [d["text"] for d in (before.get("evidence") or {}).get("differences", [])]
    now = [d["text"] for d in (after.get("evidence") or {}).get("differences", [])]

    def said(differences: list[str]) -> set[str]:  # the error, not the listing it may append
        return {signature(d)[:120] for d in differences}

    return bool(was) and all(RAISED.search(d) for d in was) and said(now) == said(was)


@functools.cache  # read at collection and by each test: the baseline is 10 MB
def by_fault() -> dict[str, list[dict]]:
    checks = registry()
    grouped: dict[str, list[dict]] = defaultdict(list)
    for cell in finding_cells():
        grouped[checks[cell["check"]].matrix_fault].append(cell)
    return dict(sorted(grouped.items()))


def faulty_run(fault: str, fixtures: list[str], checks: list[str], versions: tuple[str, ...],
               out: Path) -> dict[tuple[str, str, str], dict]:
    """The `vllm-backend` cells of a matrix run with `fault` planted, by (fixture, version,
    check): run as `conformance run` runs them, each worker with the fault around its cells."""
    command = [sys.executable, "-m", "conformance", "run", "--vllm", VLLM,
               "--versions", ",".join(versions), "--fixtures", ",".join(fixtures),
               "--checks", ",".join(checks), "--subjects", "vllm-backend", "--output", str(out),
               "--fault", fault]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=3000)
    assert (out / "results.json").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return {(c["fixture"], c["version"], c["check"]): c
            for c in json.loads((out / "results.json").read_text())["cells"]}


def test_every_check_names_a_backend_matrix_fault_it_proves():
    for check in registry().values():
        assert check.matrix_fault, f"{check.id}: no matrix_fault"
        assert kind(check.matrix_fault) == "backend", check.id
        proven = {p.fault for p in (check.proof, *check.more_proofs)}
        assert check.matrix_fault in proven, f"{check.id}: {check.matrix_fault} proves nothing"


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.parametrize("fault", sorted(by_fault()))
def test_the_matrix_fault_fails_every_cell_a_finding_explains(fault, tmp_path):
    cells = by_fault()[fault]
    fixtures = sorted({c["fixture"] for c in cells})
    checks = sorted({c["check"] for c in cells})
    got = faulty_run(fault, fixtures, checks, VERSIONS, tmp_path / "run")
    swallowed = []
    for cell in cells:  # each grouped under its check's matrix fault
        key = (cell["fixture"], cell["version"], cell["check"])
        if key in UNREACHED:
            continue
        now = got[key]
        if now["status"] != "fail" and not never_reaches(cell, now):
            said = Verdict.from_dict(now).detail[:300]
            swallowed.append(f"{cell['fixture']}/{cell['check']}@{cell['version']} "
                             f"({cell['finding']}): {now['status']} {said}")
    assert not swallowed, f"{fault} swallowed in {len(swallowed)} cell(s):\n" + \
        "\n".join(swallowed)


# Issue #31's audit: planted faults that known findings swallowed (xfail with the fault) on
# transformers 5.17.0, before differences were judged each on its own
ONCE_SWALLOWED = [("backend-logits-negated", "gemma3", "generate"),
                  ("backend-offset-shift", "gemma3", "processing"),
                  ("swapped-items", "qwen3_vl", "encoder")]


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.parametrize("fault, fixture, check", ONCE_SWALLOWED)
def test_a_fault_a_finding_once_swallowed_fails_its_cell(fault, fixture, check, tmp_path):
    got = faulty_run(fault, [fixture], [check], ("5.17.0",), tmp_path / "run")
    cell = got[(fixture, "5.17.0", check)]
    assert cell["status"] == "fail", cell
