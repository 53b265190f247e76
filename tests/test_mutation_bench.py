"""The mutation benchmark's data and judgement, without running it (benchmarks/mutation.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import mutation  # noqa: E402


@pytest.fixture(scope="module")
def installed() -> Path:
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed")
    return mutation.installed_package()


def test_every_mutant_changes_exactly_one_line(installed: Path) -> None:
    assert len(mutation.MUTANTS) >= 20
    assert len({m.id for m in mutation.MUTANTS}) == len(mutation.MUTANTS)
    for mutant in mutation.MUTANTS:
        original = (installed / mutation.BACKEND_DIR.relative_to("vllm") / mutant.file
                    ).read_text()
        mutated = mutation.mutated_text(original, mutant)  # asserts one place, valid Python
        changed = [(a, b) for a, b in zip(original.splitlines(), mutated.splitlines(),
                                          strict=True) if a != b]
        assert len(changed) == 1, mutant.id


def test_replace_file_makes_a_new_inode(tmp_path: Path) -> None:
    """The shared environment's files are hard links: a mutant never writes through one."""
    original = tmp_path / "module.py"
    original.write_text("x = 1\n")
    link = tmp_path / "link.py"
    link.hardlink_to(original)
    mutation.replace_file(link, "x = 2\n")
    assert original.read_text() == "x = 1\n"
    assert link.stat().st_ino != original.stat().st_ino


@pytest.mark.parametrize(("status", "detail", "precise"), [
    ("fail", "vs vllm-native: prompt ids differ at position 5", True),
    ("fail", "raised ValueError: The expanded prompt holds 3 image token(s)", False),
    ("fail", "backend: TypeError: got an unexpected keyword argument", False),
    ("fail", "backend on 'recipe prompt': RuntimeError: size; impl on 'x': 2 position(s) "
             "differ, first at token 4", True),
    ("fail", "backend image item 0: max abs 0.5", True),
    ("fail", "text only: backend: RuntimeError: stack expects a non-empty TensorList", False),
    ("fail", "text only: backend: RuntimeError: x; vs hf: text only: impl: ValueError: y", False),
    ("fail", "text only: backend: RuntimeError: x; vs hf: backend image item 0: max abs 1", True),
    ("fail", "request options {'max_pixels': 784}: vs vllm-native: prompt ids differ", True),
    ("error", "setup: ValueError: no", False),
    ("timeout", "no verdict within 300 s", False),
])
def test_precise_means_a_comparison(status: str, detail: str, precise: bool) -> None:
    assert mutation.is_comparison(judged(status, detail)) is precise


def judged(status: str, text: str) -> dict:
    """A results.json cell as the judge writes one: a failure's evidence (a model check's
    problems, which its one difference joins with "; ", also one by one in its data), else
    a detail."""
    if status != "fail":
        return {"status": status, "detail": text, "data": {}}
    problems = text.split("; ")
    return {"status": status, "evidence": {"differences": [{"text": text}]},
            "data": {"problems": problems} if len(problems) > 1 else {}}


def test_outcome_of_a_mutant() -> None:
    mutant = mutation.MUTANTS[0]
    fixture, version = mutant.fixtures[0], mutant.versions[0]
    reference = {(fixture, version, "processing"): {"status": "pass", "detail": ""},
                 (fixture, version, "errors"): {"status": "xfail", "detail": "known"},
                 (fixture, version, "cache"): {"status": "pass", "detail": ""}}
    crashed = {(fixture, version, "processing"): {"status": "error", "detail": "ValueError"},
               (fixture, version, "errors"): {"status": "xfail", "detail": "known"},
               (fixture, version, "cache"): {"status": "xfail", "detail": "known",
                                            "finding": "f"}}
    assert mutation.outcome(mutant, reference, crashed)["outcome"] == "killed (not precise)"
    compared = {**crashed, (fixture, version, "cache"): judged("fail", "differ")}
    assert mutation.outcome(mutant, reference, compared)["outcome"] == "killed (precise)"
    masked = {**reference, (fixture, version, "cache"): crashed[(fixture, version, "cache")]}
    assert mutation.outcome(mutant, reference, masked)["outcome"] == \
        "masked by a known finding"
    assert mutation.outcome(mutant, reference, reference)["outcome"] == "survived"
    other_evidence = {**reference, (fixture, version, "errors"): {"status": "xfail",
                                                                 "detail": "known, other"}}
    assert mutation.outcome(mutant, reference, other_evidence)["outcome"] == \
        "masked by a known finding"


def test_merge_keeps_the_other_mutants_and_rescores() -> None:
    """--merge: new outcomes replace a mutant's earlier one, the rest are kept, the score is
    over all of them, and each contributing run is listed."""
    first, second, third = (m.id for m in mutation.MUTANTS[:3])

    def row(mutant_id: str, outcome: str) -> dict:
        return {"id": mutant_id, "outcome": outcome, "step": "", "seconds": 1.0,
                "killing_cells": [], "masked_cells": []}

    previous = mutation.summarise([row(first, "killed (precise)"), row(second, "survived")],
                                  {"measured": "2026-12-01", "seconds_total": 10.0,
                                   "reference_seconds": 2.0, "installed_file_untouched": True})
    result = mutation.summarise([row(second, "killed (precise)"), row(third, "survived")],
                                {"measured": "2026-12-03", "seconds_total": 5.0,
                                 "reference_seconds": 1.0, "installed_file_untouched": True,
                                 "installed_fingerprint": {}, "imported_from": "x"})
    entry = mutation.merged(previous, result)
    assert [r["id"] for r in entry["results"]] == [first, second, third]
    assert entry["precise_kills"] == 2 and entry["mutants"] == 3
    assert [run["mutants"] for run in entry["runs"]] == [[first], [second, third]]
    assert entry["seconds_total"] == 15.0 and entry["installed_file_untouched"]
    again = mutation.merged(entry, result)  # merging the same run twice changes nothing
    assert again["results"] == entry["results"] and len(again["runs"]) == 2
