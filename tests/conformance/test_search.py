"""A suite cell's search without vLLM: the floor a pass needs, the seed it draws from and
records, the findings' examples it runs. The check and the context are stand-ins, so each
search takes a fraction of a second."""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import settings

from conformance.checks.contract import PASS, Check, Outcome, Proof
from conformance.cli import build_parser, main
from conformance.cli.check import rerun_argv
from conformance.cli.run import run_seed
from conformance.core.settings import current, use
from conformance.inputs import examples
from conformance.inputs.cases import Case
from conformance.inputs.media import Media
from conformance.results.verdict import Verdict
from conformance.run import suite
from conformance.run.plan import key_here
from fixtures.registry import get_recipe


@dataclass
class Party:
    processor: object = None


@dataclass
class Context:
    recipe: object
    path: str = "/nowhere"  # no checkpoint: the stand-in check reads none
    subject: Party = field(default_factory=Party)
    oracles: dict = field(default_factory=dict)
    video: bool = False
    oracle_failures: Counter = field(default_factory=Counter)  # as the real Context counts them


FAILING: list[Case] = []  # cases the stand-in check finds a (new) difference in


@pytest.fixture
def searched(monkeypatch):
    """The cases each run_suite call hands its check (one list per call), on a check that
    passes every case but those in FAILING."""
    calls: list[list[Case]] = []

    def run(ctx, case: Case) -> Outcome:
        calls[-1].append(case)
        return Outcome(False, "planted: this case differs") if case in FAILING else PASS

    def make_context(fixture: str, *args, **kwargs) -> Context:
        calls.append([])
        return Context(get_recipe(fixture))

    check = Check(id="prompt-ids", statement="", hint="", level="case", run=run,
                  proof=Proof("none", "llava", ""))
    monkeypatch.setattr(suite, "get_check", lambda _: check)
    monkeypatch.setattr(suite, "make_context", make_context)
    use(current().but(seed=None))  # the profile's seed (tests/conftest.py restores it)
    return calls


def test_the_default_profile_compares_at_least_the_floor_per_search(searched, tmp_path):
    assert settings.get_profile("dev").max_examples >= suite.MIN_COMPARED == 25
    assert suite.compared_floor() == 25 and suite.compared_floor(200) == 100
    verdict = suite.run_suite(key_here("qwen2_vl", "impl", "prompt-ids"), repro_dir=tmp_path)
    assert verdict.status == "pass", verdict.detail
    assert verdict.data["compared_floor"] == 25
    # both searches (default options, option sets) compared the floor each
    assert verdict.data["compared_by_pass"] == {"default": 25, "drawn": 25}


def test_fewer_compared_cases_than_the_floor_is_inconclusive(searched, tmp_path):
    verdict = suite.run_suite(key_here("llava", "impl", "prompt-ids"), max_examples=24,
                              repro_dir=tmp_path)
    assert verdict.status == "inconclusive"
    assert "24 cases compared with the default options (floor 25" in verdict.detail


def test_a_case_compared_twice_counts_once(searched, monkeypatch, tmp_path):
    item = Media("image", height=20, width=30, seed=1)
    twice = Case("llava", "image", ("", ""), (item,))
    monkeypatch.setattr(examples, "for_search", lambda *a: (twice, twice))
    verdict = suite.run_suite(key_here("llava", "impl", "prompt-ids"), repro_dir=tmp_path)
    assert searched[0][:2] == [twice, twice]
    assert verdict.data["explicit"] == 1
    assert verdict.data["compared"] == verdict.data["examples"] - 1
    # the example itself is compared, but the floor counts drawn cases only
    assert verdict.data["compared_by_pass"] == {"default": 25}


def few_cases(monkeypatch, kinds: int, draws_each: int = 1000) -> list[Case]:
    """Every draw one of `kinds` cases, each made by `draws_each` draws (as an empty text piece
    beside another makes the same text as that piece alone)."""
    from hypothesis import strategies as st

    made = [Case("llava", "image", ("", f"text {i}"),
                 (Media("image", height=20, width=30, seed=i),)) for i in range(kinds)]
    drawn = st.tuples(st.integers(0, kinds - 1),
                      st.integers(1, draws_each)).map(lambda t: made[t[0]])
    monkeypatch.setattr(suite, "cases", lambda *a, **k: drawn)
    monkeypatch.setattr(examples, "for_search", lambda *a: ())
    return made


def test_a_case_drawn_again_is_replaced_by_another_draw(searched, monkeypatch, tmp_path):
    few_cases(monkeypatch, 40)
    verdict = suite.run_suite(key_here("llava", "impl", "prompt-ids"), repro_dir=tmp_path)
    ran = [case.to_json() for case in searched[0]]
    assert verdict.status == "pass", verdict.detail
    # the search went on drawing until the floor's distinct cases, each run once
    assert len(ran) == len(set(ran)) == 25 and verdict.data["repeated"] > 0
    assert verdict.data["compared_by_pass"] == {"default": 25}


@pytest.mark.parametrize("draws_each", [1000, 2])
def test_too_few_distinct_cases_stay_inconclusive(searched, monkeypatch, tmp_path, draws_each):
    # with 2 draws per case hypothesis runs some draw twice: the draw that ran a case runs it
    # again (a rejected replay of a passing draw would be a FlakyFailure, an `error`)
    few_cases(monkeypatch, 10, draws_each)
    verdict = suite.run_suite(key_here("llava", "impl", "prompt-ids"), repro_dir=tmp_path)
    assert verdict.status == "inconclusive", verdict.detail
    assert "10 cases compared with the default options (floor 25" in verdict.detail


def test_a_failing_case_drawn_again_is_still_shrunk_and_reported(searched, monkeypatch,
                                                                  tmp_path):
    made = few_cases(monkeypatch, 40)
    monkeypatch.setattr(sys.modules[__name__], "FAILING", made[5:])
    verdict = suite.run_suite(key_here("llava", "impl", "prompt-ids"), repro_dir=tmp_path)
    assert verdict.status == "fail" and "planted: this case differs" in verdict.detail


def test_the_fixed_seed_is_recorded_and_the_nightly_seed_changes(searched, tmp_path):
    verdict = suite.run_suite(key_here("llava", "impl", "prompt-ids"), repro_dir=tmp_path)
    assert verdict.data["seed"] == suite.SEARCH_SEED
    assert suite.default_seed("dev") == suite.default_seed("ci") == suite.SEARCH_SEED
    assert len({suite.default_seed("nightly") for _ in range(3)}) == 3


def test_a_seed_replays_the_same_cases(searched, monkeypatch, tmp_path):
    def draw(seed: int) -> list[str]:
        use(current().but(seed=seed))
        verdict = suite.run_suite(key_here("llava", "impl", "prompt-ids"), repro_dir=tmp_path)
        assert verdict.data["seed"] == seed
        return [case.to_json() for case in searched[-1]]

    first = draw(123456789)
    assert draw(123456789) == first
    assert draw(987654321) != first


def test_the_findings_examples_run_first_in_their_search(searched, tmp_path):
    verdict = suite.run_suite(key_here("gemma3", "impl", "prompt-ids"), repro_dir=tmp_path)
    ran = searched[0]
    default, pan_and_scan = (examples.for_search(get_recipe("gemma3"), drawn, False)
                             for drawn in (False, True))
    assert default and pan_and_scan  # the file gives gemma3 one of each
    assert ran[:len(default)] == list(default)
    drawn_start = next(i for i, case in enumerate(ran) if case.processor_kwargs)
    assert ran[drawn_start:drawn_start + len(pan_and_scan)] == list(pan_and_scan)
    assert verdict.data["explicit"] == len(default) + len(pan_and_scan)
    assert verdict.data["compared_by_pass"] == {"default": 25, "drawn": 25}


def test_a_failing_example_does_not_stop_the_drawn_cases(searched, monkeypatch, tmp_path):
    failing = Case("llava", "image", ("", ""), (Media("image", height=20, width=30, seed=1),))
    monkeypatch.setattr(examples, "for_search", lambda *a: (failing,))
    monkeypatch.setattr(sys.modules[__name__], "FAILING", [failing])
    verdict = suite.run_suite(key_here("llava", "impl", "prompt-ids"), repro_dir=tmp_path)
    assert verdict.status == "fail" and "planted: this case differs" in verdict.detail
    assert searched[0][0] == failing and len(searched[0]) == 1 + 25


def test_run_and_check_take_a_seed_and_a_resumed_run_keeps_its_own():
    assert build_parser().parse_args(["run", "--seed", "7"]).seed == 7
    args = build_parser().parse_args(["check", "some/model", "--seed", "7"])
    assert rerun_argv(args)[-2:] == ["--seed", "7"]
    done = [Verdict("llava", "5.17.0", "cache", "pass", data={"seed": 11})]
    assert run_seed(None, "nightly", done) == 11
    assert run_seed(11, "nightly", done) == 11
    assert run_seed(None, "dev", []) == suite.SEARCH_SEED
    with pytest.raises(ValueError, match="drew from seed 11"):
        run_seed(12, "nightly", done)


def test_a_run_records_its_seed_and_hands_it_to_its_workers(monkeypatch, tmp_path):
    seen = []

    def run_cells(cells, run_dir, record, settings, **kwargs):  # the workers get the settings
        seen.append(str(settings.seed))
        for key in cells:
            record(Verdict.of(key, "pass", "", data={"seed": settings.seed}))

    monkeypatch.setattr("conformance.run.session.run_cells", run_cells)
    out = Path(tmp_path)
    args = ["run", "--vllm", "0.31.0", "--fixtures", "llava", "--versions", "5.17.0",
            "--subjects", "impl",
            "--checks", "prompt-ids", "--profile", "nightly", "--output", str(out)]
    assert main([*args, "--seed", "42"]) == 0
    assert seen == ["42"]
    assert json.loads((out / "results.json").read_text())["meta"]["seed"] == 42
    assert main([*args, "--resume"]) == 0  # nothing left to run; the seed is the run's
    assert json.loads((out / "results.json").read_text())["meta"]["seed"] == 42
