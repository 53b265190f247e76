"""Known disagreements turn a matching failure into xfail, and nothing else."""

from conformance.expectations import known_reason
from conformance.checks.processing import judge


def test_a_known_failure_with_its_evidence_is_xfail_with_the_reason():
    verdict = judge("gemma3", "processing", "5.17.0", "prompt ids differ at position 5", {}, 0.1)
    assert verdict.status == "xfail"
    assert known_reason("gemma3", "processing", "5.17.0").reason in verdict.detail
    assert "[observed: prompt ids differ at position 5]" in verdict.detail


def test_a_different_failure_of_a_known_cell_is_not_hidden():
    verdict = judge("gemma3", "processing", "5.17.0", "image: native has 2 placeholders", {}, 0.1)
    assert verdict.status == "fail"


def test_a_known_cell_that_passes_is_xpass():
    assert judge("gemma3", "processing", "5.17.0", None, {}, 0.1).status == "xpass"


def test_known_entries_are_bounded_by_version():
    assert "Legacy path" in known_reason("gemma3", "processing", "5.12.1").reason
    assert "Offsets path" in known_reason("gemma3", "processing", "5.15.1").reason
    assert known_reason("llava", "processing", "5.17.0") is None


def test_a_known_error_is_xfail_only_with_its_evidence():
    from conformance.checks.processing import run_cell
    from fixtures.registry import get_recipe

    recipe = get_recipe("qwen2_audio")

    def fail_with(message):
        def build(name):
            raise AttributeError(message)
        return build

    known = run_cell(recipe, "model", "5.17.0",
                     fail_with("'Qwen2AudioModel' object has no attribute 'get_audio_features'"))
    assert known.status == "xfail" and "get_audio_features" in known.detail
    other = run_cell(recipe, "model", "5.17.0", fail_with("something else broke"))
    assert other.status == "error" and other.detail.endswith("something else broke")


def test_readme_lists_every_known_incompatibility():
    from pathlib import Path

    from conformance.expectations import markdown_table

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert markdown_table() in readme, "regenerate README's list with `conformance known`"


def test_a_finding_behind_a_processor_option_needs_that_option():
    crops = "raised ValueError: Gemma3Processor returned 5 row(s) of image data for 2 image(s)"
    entry = known_reason("gemma3", "slicing", "5.17.0", "impl", crops, ("do_pan_and_scan",))
    assert entry is not None and entry.options == ("do_pan_and_scan",)
    # the same failure on the default options is not explained by it
    assert known_reason("gemma3", "slicing", "5.17.0", "impl", crops) is None
    # and a check that never sets options (smoke) cannot be xpass because of it
    assert judge("gemma3", "encoder", "5.17.0", None, {}, 0.1).status == "pass"
