"""What a suite cell's verdict means: a known finding hides nothing new, a stale one shows as
`xpass`, and a search that compared too little is `inconclusive`, never a pass."""

import dataclasses

import pytest

from conformance import expectations
from conformance.core.signatures import difference_kind
from conformance.run.plan import key_here
from conformance.run.suite import run_suite
from conformance.subjects.faults import Fault

pytestmark = pytest.mark.vllm


def test_a_second_failure_in_a_cell_with_a_known_finding_fails_the_cell(tmp_path):
    # gemma3 placeholders is xfail for its newline findings (the ids around an image's
    # '\n\n'); planting an offset shift adds a second kind of difference no finding explains:
    # each item's range is still compared, by what its embedding positions hold
    clean = run_suite(key_here("gemma3", "impl", "placeholders"), repro_dir=tmp_path)
    assert clean.status == "xfail", clean.detail
    planted = run_suite(key_here("gemma3", "impl", "placeholders"), fault=Fault("offset-shift"),
                        repro_dir=tmp_path)
    assert planted.status == "fail", planted.detail
    assert "its embedding positions hold other ids" in planted.detail


def test_a_finding_that_no_longer_shows_is_xpass(monkeypatch, tmp_path):
    stale = expectations.Finding(
        id="llava-stale", title="planted", reason="a finding llava does not show",
        fixtures=("llava",), evidence={"prompt-ids": ("prompt ids differ",)})
    findings = expectations.load()
    monkeypatch.setattr(expectations, "load", lambda path=None: (*findings, stale))
    verdict = run_suite(key_here("llava", "impl", "prompt-ids"), repro_dir=tmp_path)
    assert verdict.status == "xpass", verdict.detail
    assert verdict.finding == "llava-stale"
    assert verdict.data["compared"] >= verdict.data["compared_floor"]


def test_a_finding_of_media_the_cell_never_drew_is_not_stale(monkeypatch, tmp_path):
    """A video finding in a cell that compared images only (above a release's window no
    video is drawn) cannot have shown: the cell passes; where it needs images, it is xpass."""
    findings = expectations.load()
    for modality, status in (("video", "pass"), ("image", "xpass")):
        stale = expectations.Finding(
            id="llava-media", title="planted", reason="a finding of one medium",
            fixtures=("llava",), evidence={"prompt-ids": ("prompt ids differ",)},
            modalities=(modality,))
        monkeypatch.setattr(expectations, "load", lambda path=None, s=stale: (*findings, s))
        verdict = run_suite(key_here("llava", "impl", "prompt-ids"), repro_dir=tmp_path)
        assert verdict.data["compared_by_modality"] == {"image": verdict.data["compared"]}
        assert verdict.status == status, (modality, verdict.detail)


def test_too_few_compared_cases_is_inconclusive_not_a_pass(monkeypatch, tmp_path):
    from conformance.subjects import context

    original = context.make_context

    def picky_oracle(*args, **kwargs):
        ctx = original(*args, **kwargs)
        native = ctx.oracles["vllm-native"]

        class Refusing:  # an oracle that processes the first case it is given, then no more
            def __init__(self):
                self.calls = 0

            def __getattr__(self, name):
                return getattr(native, name)

            def process(self, case, **kw):
                self.calls += 1
                if self.calls > 1:
                    raise ValueError("refuses this case")
                return native.process(case, **kw)

        return dataclasses.replace(ctx, oracles={**ctx.oracles, "vllm-native": Refusing()},
                                   _memo={})

    monkeypatch.setattr("conformance.run.suite.make_context", picky_oracle)
    # no findings' example: the one case the oracle processes is a drawn one (the floor's)
    monkeypatch.setattr("conformance.inputs.examples.for_search", lambda *args: ())
    verdict = run_suite(key_here("llava", "impl", "placeholders"), repro_dir=tmp_path)
    assert verdict.status == "inconclusive", verdict.detail
    assert "refuses this case" in verdict.detail
    assert verdict.data["compared"] < verdict.data["compared_floor"]
    assert verdict.data["oracle_failures"] > 0


def test_difference_kinds_tell_kinds_of_difference_apart_but_not_values():
    kind = difference_kind
    a = kind("cache", "image item 0: hash ('ab12',) in the batch but ('cd34',) alone")
    b = kind("cache", "image item 2: hash ('ff00',) in the batch but ('0a0b',) alone")
    c = kind("cache", "image item 0 alone vs in batch.pixel_values: shape [1, 2] vs [1, 3]")
    assert a == b != c
    assert kind("errors", "3 placeholders for 2 items: a bare assertion instead of a "
                "clear error: AssertionError('x')") != kind(
        "errors", "3 placeholders for 2 items: no error; 2 items were placed as {}")


def test_a_count_mismatch_error_must_name_the_modality_and_a_count():
    from conformance.checks.errors import names_the_mismatch

    assert names_the_mismatch("Expected there to be 2 prompt placeholders corresponding to 2 "
                              "image items, but instead found 1", "image", (2, 1))
    assert names_the_mismatch("1 audio item(s) were passed but the prompt holds 3", "audio", (1, 3))
    # vLLM's wrapper around a bare StopIteration: the data's repr holds numbers, not the counts
    assert not names_the_mismatch("Failed to apply LlavaProcessor on data={'text': '<image>', "
                                  "'images': [<PIL.Image size=16x16>]} with kwargs={}: ",
                                  "image", (2, 1))
    assert not names_the_mismatch("Number of image placeholders does not match", "image", (2, 1))
    assert not names_the_mismatch("2 items but 1 placeholder", "audio", (2, 1))


def test_a_checkpoint_check_hands_every_problem_to_the_judge_on_its_own():
    from conformance.checks.contract import PROBLEMS, returning_outcome

    run = returning_outcome(lambda: ("a; b", {PROBLEMS: ["a", "b"], "n": 1}))
    outcome = run()
    assert not outcome.ok and outcome.differences == ("a", "b")
    assert outcome.measured == {"n": 1}  # the list is not a measurement
    assert returning_outcome(lambda: (None, {PROBLEMS: []}))().ok


def test_evidence_holds_no_memory_address():
    # vLLM's "Failed to apply ... on data=..." holds the images' reprs: the address would make
    # every run's evidence, reports and baseline differ
    from conformance.results.judge import Failure

    failure = Failure("Failed to apply XProcessor on data={'images': [<PIL.Image.Image image "
                      "mode=RGB size=16x16 at 0x7F78EFC0C550>]}")
    assert failure.evidence == ("Failed to apply XProcessor on data={'images': [<PIL.Image.Image "
                                "image mode=RGB size=16x16>]}")


def test_a_checkpoint_difference_found_under_options_is_judged_under_them(monkeypatch):
    # a checkpoint-level check that tries option sets (profiling's option forms) says which
    # difference came from which; a finding bound to an option explains it only under it
    from conformance.checks.contract import Check, Outcome, Proof
    from conformance.results.verdict import CellKey
    from conformance.run.cell import run_checkpoint

    bound = expectations.Finding(
        id="planted-under-option", title="planted", reason="shown with the option only",
        fixtures=("llava",), evidence={"profiling": ("budget differs",)}, options=("opt",))
    findings = expectations.load()
    monkeypatch.setattr(expectations, "load", lambda path=None: (*findings, bound))

    def check_giving(options):
        def run(recipe, path, **_):
            outcome = Outcome.judged(["budget differs"], set())
            outcome.options = {"budget differs": options}
            return outcome
        return Check(id="profiling", statement="", hint="", level="checkpoint", run=run,
                     proof=Proof("none", "llava", ""))

    key = CellKey("llava", "5.17.0", "vllm-backend", "profiling")
    under = run_checkpoint(key, None, check_giving((("opt", True),)), lambda: "/nowhere")
    assert under.status == "xfail" and under.finding == "planted-under-option", under.detail
    assert "(with opt=True)" in under.detail
    without = run_checkpoint(key, None, check_giving(()), lambda: "/nowhere")
    assert without.status == "fail", without.detail
